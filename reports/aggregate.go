package reports

import (
	"container/list"
	"fmt"
	"sort"
	"sync"
	"time"
)

// The results a decision is counted as, in the report's terms.
const (
	ResultPass = "pass"
	ResultFail = "fail"
	ResultWarn = "warn"
	ResultSkip = "skip"
)

// NoPolicy is the policy a decision no rule matched is counted under (the
// namespace's default, a freeze, no bundle): its rule is the decision's
// code, or "default".
const NoPolicy = "(none)"

// Default bounds of the aggregation.
const (
	DefaultWindow = time.Hour
	// DefaultMaxEntries bounds (namespace, policy, rule, result) entries in
	// all: each costs a few hundred bytes, so about 20 MiB at most.
	DefaultMaxEntries = 50_000
	// DefaultMaxEntriesPerNamespace bounds one namespace's entries, so one
	// namespace's many rules cannot evict every other's; it also keeps a
	// report well inside an object's size limit (about 400 bytes a result).
	DefaultMaxEntriesPerNamespace = 1_000
	// windowBuckets is how many steps the window moves in: counts age out
	// one bucket (a minute of an hour) at a time.
	windowBuckets = 60
)

// verdict is outcome's mapping from a decision's effect (and, for an
// asked call, what it settled into) to the report's result.
func verdict(decision, effect string) string {
	switch effect {
	case "deny":
		return ResultFail
	case "warn", "redact":
		return ResultWarn
	case "audit":
		return ResultSkip
	case "allow":
		return ResultPass
	}
	// ask, or an effect this version does not know: what was decided.
	switch decision {
	case "allow":
		return ResultPass
	case "deny":
		return ResultFail
	}
	return ResultWarn // still held for a person
}

// Key names one result of a namespace's report.
type Key struct {
	Kind   string // ClusterPolicy, or "" for a Policy
	Policy string
	Rule   string
	Result string
}

// Result is one line of a report: how many decisions the key counted in
// the window, and the newest of them.
type Result struct {
	Key
	Count int64
	Agent string
	Tool  string
	Last  time.Time
}

type bucketCount struct {
	bucket int64
	n      int64
}

type entry struct {
	ns     string
	key    Key
	counts []bucketCount // ascending buckets, at most windowBuckets+1
	agent  string
	tool   string
	last   time.Time
	lru    *list.Element
}

// AggregatorOptions bound an Aggregator; zero fields take the defaults.
type AggregatorOptions struct {
	Window                 time.Duration
	MaxEntries             int
	MaxEntriesPerNamespace int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Drops counts what the aggregator did not keep.
type Drops struct {
	// TooOld are decisions older than the window when they arrived.
	TooOld uint64
	// Evicted are entries dropped, least recently counted first, to make
	// room under MaxEntries.
	Evicted uint64
	// NamespaceFull are decisions whose namespace already had
	// MaxEntriesPerNamespace entries, none of them this decision's.
	NamespaceFull uint64
}

// Aggregator counts decisions per namespace, policy, rule and result over a
// rolling window, in bounded memory. It is safe for concurrent use.
type Aggregator struct {
	mu     sync.Mutex
	o      AggregatorOptions
	bucket time.Duration
	byNS   map[string]map[Key]*entry
	lru    *list.List // of *entry, most recently counted at the front
	drops  Drops
}

// NewAggregator returns an empty aggregator.
func NewAggregator(o AggregatorOptions) *Aggregator {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxEntriesPerNamespace <= 0 {
		o.MaxEntriesPerNamespace = DefaultMaxEntriesPerNamespace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Aggregator{o: o, bucket: max(time.Second, o.Window/windowBuckets),
		byNS: map[string]map[Key]*entry{}, lru: list.New()}
}

// CheckWindow refuses a window the aggregation cannot use.
func CheckWindow(w time.Duration) error {
	if w < time.Minute || w > 7*24*time.Hour {
		return fmt.Errorf("%s: the window must be from 1m to 168h", w)
	}
	return nil
}

// Add counts rec in namespace ns (the sender's, which the endpoint has
// checked), and each Audit-mode verdict it carries as a skip.
func (a *Aggregator) Add(ns string, rec *Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.o.Now()
	at := rec.At
	if at.After(now) { // the sidecar's clock runs ahead of ours
		at = now
	}
	if !at.After(now.Add(-a.o.Window)) {
		a.drops.TooOld++
		return
	}
	k := Key{Kind: rec.PolicyKind, Policy: rec.PolicyID, Rule: rec.RuleID, Result: verdict(rec.Decision, rec.Effect)}
	if k.Policy == "" {
		k.Kind, k.Policy, k.Rule = "", NoPolicy, rec.Code
		if k.Rule == "" {
			k.Rule = "default"
		}
	}
	a.count(ns, k, at, rec)
	for _, s := range rec.Shadow {
		a.count(ns, Key{Kind: s.Kind, Policy: s.Policy, Rule: s.Rule, Result: ResultSkip}, at, rec)
	}
}

func (a *Aggregator) count(ns string, k Key, at time.Time, rec *Record) {
	keys := a.byNS[ns]
	e := keys[k]
	if e == nil {
		if len(keys) >= a.o.MaxEntriesPerNamespace {
			a.drops.NamespaceFull++
			return
		}
		for a.lru.Len() >= a.o.MaxEntries {
			a.remove(a.lru.Back().Value.(*entry))
			a.drops.Evicted++
		}
		if keys = a.byNS[ns]; keys == nil { // remove may have dropped it
			keys = map[Key]*entry{}
			a.byNS[ns] = keys
		}
		e = &entry{ns: ns, key: k}
		e.lru = a.lru.PushFront(e)
		keys[k] = e
	} else {
		a.lru.MoveToFront(e.lru)
	}
	b := at.UnixNano() / int64(a.bucket)
	i := sort.Search(len(e.counts), func(i int) bool { return e.counts[i].bucket >= b })
	switch {
	case i < len(e.counts) && e.counts[i].bucket == b:
		e.counts[i].n++
	default:
		e.counts = append(e.counts, bucketCount{})
		copy(e.counts[i+1:], e.counts[i:])
		e.counts[i] = bucketCount{bucket: b, n: 1}
	}
	if !at.Before(e.last) {
		e.agent, e.tool, e.last = rec.Agent, rec.Tool, at
	}
}

func (a *Aggregator) remove(e *entry) {
	a.lru.Remove(e.lru)
	keys := a.byNS[e.ns]
	delete(keys, e.key)
	if len(keys) == 0 {
		delete(a.byNS, e.ns)
	}
}

// Expire forgets the counts that left the window: a bucket counts while
// some of it is inside the window.
func (a *Aggregator) Expire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	cutoff := a.o.Now().Add(-a.o.Window).UnixNano() / int64(a.bucket)
	for _, keys := range a.byNS {
		for _, e := range keys {
			i := sort.Search(len(e.counts), func(i int) bool { return e.counts[i].bucket > cutoff })
			if i == len(e.counts) {
				a.remove(e)
				continue
			}
			e.counts = append(e.counts[:0], e.counts[i:]...)
		}
	}
}

// Namespaces lists the namespaces that have counts, sorted.
func (a *Aggregator) Namespaces() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.byNS))
	for ns := range a.byNS {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// Results are ns's counts, sorted by kind, policy, rule and result. Call
// Expire first for the window as of now.
func (a *Aggregator) Results(ns string) []Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := a.byNS[ns]
	out := make([]Result, 0, len(keys))
	for k, e := range keys {
		r := Result{Key: k, Agent: e.agent, Tool: e.tool, Last: e.last}
		for _, c := range e.counts {
			r.Count += c.n
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Key, out[j].Key
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Policy != b.Policy {
			return a.Policy < b.Policy
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Result < b.Result
	})
	return out
}

// Drops reports what was not kept so far.
func (a *Aggregator) Drops() Drops {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.drops
}
