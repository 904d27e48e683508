// Package usage counts allowed tool calls over trailing windows, for the
// engine's rateLimit and tokenBudget conditions. The sidecar records every
// call it allows; `toolgate eval --history` replays a file into the same
// Ledger, so both count alike.
package usage

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// Defaults of the sidecar's --usage-max-keys and --usage-max-events-per-key.
// A counter costs 16 bytes an event, so the worst case is
// DefaultMaxKeys * DefaultMaxEventsPerKey * 16 bytes (16 MiB, a quarter of
// an injected sidecar's memory limit); counters grow only as calls
// arrive, and most stay small.
const (
	DefaultMaxKeys         = 1024
	DefaultMaxEventsPerKey = 1024
)

// Bounds on the caps: one call makes up to four counters (its agent's and
// its session's calls to its tool, and their tokens; six when the bundle
// has a per: namespace limit, which also counts the namespace's), a cap of
// one event could not merge, and past the upper bounds a value is a typo
// rather than a tuning. Below six keys a call needing six is denied
// (ErrUnavailable), never counted in part.
const (
	MinKeys         = 4
	MinEventsPerKey = 2
	MaxKeysLimit    = 1 << 20
	MaxEventsLimit  = 1 << 20
)

// Ledger counts allowed calls: per key (an agent or a session, as
// engine.UsageKeys names them, and the namespace as a whole when a limit
// is per: namespace) the calls to each tool, and the tokens of all tools.
// It implements engine.Usage and is safe for concurrent use.
//
// Memory is bounded, and a bound never makes a limit pass:
//
//   - Each counter (a key's calls to one tool, or a key's tokens) holds at
//     most maxEvents events: past it, events merge into their next
//     neighbours, stamped with the later time, so a count can only be
//     over-estimated, never under-estimated; the events merged are those
//     whose times move least relative to their age, so the error stays a
//     small fraction of a window (see series.merge).
//   - At most maxKeys counters are kept. A counter holding calls that a
//     limit's window still reaches (the served bundle's longest,
//     engine.Compiled.UsageWindow) is never forgotten for an agent's sake,
//     however many new keys arrive: session ids are the client's choice,
//     and a flood of fresh ones would otherwise evict the agent's own
//     counters and reset its limits (issue 24 §3). The namespace's
//     counters are kept as an agent's are: of the agent kind, never taken
//     for a session's sake. The counters of one
//     agent's sessions are bounded to half the cap: past it, that agent's
//     least recently recorded session counter is forgotten, never
//     another's, never an agent counter. When no counter may be forgotten,
//     a call that needs a new one cannot be counted, and Decide denies it
//     (ErrUnavailable) rather than allow it uncounted.
//   - Forgetting a counter is remembered: a counter made later for a key
//     of that kind (agent or session), or read while absent, may lack calls
//     up to the newest one forgotten, and a window that reaches back that
//     far cannot be counted (Decide denies ErrUnavailable). A state file
//     that could not be read is remembered the same way (state.go).
//
// Events older than engine.MaxLimitWindow, which no window reaches, are
// dropped. Keys and tool names are hashed under a random per-ledger seed;
// two names sharing a hash would share a counter, which only
// over-estimates. Each counter also keeps its names (at most maxNameBytes
// each; longer ones by their SHA-256), which a state file needs.
type Ledger struct {
	maxKeys, maxEvents int
	// maxSessionKeys bounds the session counters one agent's calls made.
	maxSessionKeys int
	seed           maphash.Seed

	mu     sync.RWMutex
	series map[seriesKey]*series
	// head is the most recently recorded counter, tail the least.
	head, tail *series
	// agents are the session counters by the agent whose call made them.
	agents  map[uint64]*owner
	scratch scratch
	// lost is, by kind (agent or session), the newest call of any counter
	// forgotten with calls still in it: a counter of that kind made since,
	// or absent, may lack calls up to then.
	lost [2]int64
	// state, when set, keeps every recorded call in a file (state.go).
	state *stateFile

	evictions atomic.Uint64
	// decideMu makes deciding and counting one step (Decide); reading is
	// the engine.Usage a decision reads through, under it.
	decideMu sync.Mutex
	reading  reading
}

// seriesKey names one counter: a key's calls to one tool, or (tokens set,
// tool 0) its tokens. The namespace's counters have namespace set and id
// 0, so no agent's name can reach them.
type seriesKey struct {
	session   bool
	namespace bool
	tokens    bool
	id        uint64
	tool      uint64
}

// Kinds of counter, indexes of Ledger.lost. The namespace's counters are
// of the agent kind: forgetting one marks the other kind's windows as not
// whole too, which can only deny, never allow.
const (
	kindAgent = iota
	kindSession
)

func (k seriesKey) kind() int {
	if k.session {
		return kindSession
	}
	return kindAgent
}

// owner is one agent's session counters, most recently recorded first.
type owner struct {
	name       string // the agent's key, as canonical keeps it
	hash       uint64
	n          int
	head, tail *series
}

// New returns a ledger holding at most maxKeys counters of at most
// maxEvents events each.
func New(maxKeys, maxEvents int) (*Ledger, error) {
	if err := CheckCaps(maxKeys, maxEvents); err != nil {
		return nil, err
	}
	return &Ledger{maxKeys: maxKeys, maxEvents: maxEvents, maxSessionKeys: maxKeys / 2, seed: maphash.MakeSeed(),
		series: make(map[seriesKey]*series), agents: make(map[uint64]*owner),
		lost: [2]int64{math.MinInt64, math.MinInt64}}, nil
}

// CheckCaps reports caps New would refuse, naming them as the sidecar's
// flags do.
func CheckCaps(maxKeys, maxEvents int) error {
	var errs []error
	if maxKeys < MinKeys || maxKeys > MaxKeysLimit {
		errs = append(errs, fmt.Errorf("--usage-max-keys must be from %d to %d, not %d", MinKeys, MaxKeysLimit, maxKeys))
	}
	if maxEvents < MinEventsPerKey || maxEvents > MaxEventsLimit {
		errs = append(errs, fmt.Errorf("--usage-max-events-per-key must be from %d to %d, not %d", MinEventsPerKey, MaxEventsLimit, maxEvents))
	}
	return errors.Join(errs...)
}

var _ engine.Usage = (*Ledger)(nil)

// ErrUnavailable is why Decide denies a call it cannot count, or whose
// limit it cannot read; the sidecar answers it deny USAGE_UNAVAILABLE.
var ErrUnavailable = errors.New("usage unavailable")

// errFull is Record's error when the call needs a counter and none may be
// forgotten.
var errFull = &unavailable{"the usage ledger holds --usage-max-keys counters, each with calls a limit's window still reaches, so this call could not be counted; denied to fail closed"}

// callKeys is what a recorded call is counted by: its keys and tool as
// canonical keeps them, and its tokens; namespace when it is also counted
// for the whole namespace.
type callKeys struct {
	agent, session, tool string
	tokens               float64
	namespace            bool
}

// keysOf is what req is counted by; namespace: under the namespace's key
// too, which only a bundle with a per: namespace limit reads
// (engine.Compiled.UsesNamespaceUsage), so the sidecar spares the two
// counters otherwise: BenchmarkRecord, which counts them, measured about
// 1.3 us a call against 0.9 us without them.
func keysOf(req engine.Request, namespace bool) callKeys {
	agent, session := engine.UsageKeys(req)
	tool, _ := req[engine.FieldToolName].(string)
	return callKeys{agent: canonical(agent.ID), session: canonical(session.ID), tool: canonical(tool), tokens: engine.CallTokens(req),
		namespace: namespace}
}

// Record counts one allowed call at now, under every key it counts under
// (its agent, its session and the namespace): one call to its tool_name,
// and its tokens (engine.CallTokens). It fails, counting nothing, when the
// call needs a counter and the ledger may forget none (see Ledger); limits
// are taken to reach back engine.MaxLimitWindow. toolgate eval --history
// replays a file with it, so any bundle reads the history whole.
func (l *Ledger) Record(req engine.Request, now time.Time) error {
	return l.record(keysOf(req, true), nanos(now), engine.MaxLimitWindow)
}

// record counts c at at. window is the longest a limit reads: a counter
// whose newest call is older may be forgotten to make room.
func (l *Ledger) record(c callKeys, at int64, window time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.count(c, at, window); err != nil {
		return err
	}
	if l.state != nil {
		return l.state.append(l, c, at, window)
	}
	return nil
}

// count is record without the state file. Callers hold mu.
func (l *Ledger) count(c callKeys, at int64, window time.Duration) error {
	agentID, sessionID, tool := l.hash(c.agent), l.hash(c.session), l.hash(c.tool)
	var keys [maxCallCounters]seriesKey
	keys[0], keys[1] = seriesKey{id: agentID, tool: tool}, seriesKey{session: true, id: sessionID, tool: tool}
	n := 2
	if c.namespace {
		keys[n] = seriesKey{namespace: true, tool: tool}
		n++
	}
	if c.tokens > 0 {
		keys[n], keys[n+1] = seriesKey{tokens: true, id: agentID}, seriesKey{session: true, tokens: true, id: sessionID}
		n += 2
		if c.namespace {
			keys[n] = seriesKey{namespace: true, tokens: true}
			n++
		}
	}
	// The counters the call uses are found and marked most recent first,
	// so that making room for the missing ones cannot take them.
	var found [maxCallCounters]*series
	missing, missingSessions := 0, 0
	for i, k := range keys[:n] {
		if s := l.series[k]; s != nil {
			found[i] = s
			l.touch(s)
		} else {
			missing++
			if k.session {
				missingSessions++
			}
		}
	}
	if missing > 0 {
		if err := l.makeRoom(l.agents[agentID], missing, missingSessions, at, window, &found); err != nil {
			return err
		}
		// Looked up again: making room may have forgotten every session
		// counter the agent had, and its owner with them.
		o := l.agents[agentID]
		if missingSessions > 0 && o == nil {
			o = &owner{name: c.agent, hash: agentID}
			l.agents[agentID] = o
		}
		for i, k := range keys[:n] {
			if found[i] == nil {
				s := &series{key: k, id: c.agent, tool: c.tool, gapUntil: l.lost[k.kind()]}
				switch {
				case k.session:
					s.id, s.owner = c.session, o
					o.n++
				case k.namespace:
					s.id = ""
				}
				if k.tokens {
					s.tool = ""
				}
				l.series[k] = s
				l.touch(s)
				found[i] = s
			}
		}
	}
	horizon := before(at, engine.MaxLimitWindow)
	for i := range n {
		amount := 1.0
		if keys[i].tokens {
			amount = c.tokens
		}
		found[i].add(at, amount, horizon, l.maxEvents, &l.scratch)
	}
	return nil
}

// makeRoom forgets counters so that missing more fit, missingSessions of
// them session counters of owner o (nil: none yet): o's own least recent
// session counters past its share, then counters no limit reads any more
// (their newest call at or before at-window), then o's session counters
// again. It never takes a counter in keep, nor another agent's counter
// that a limit still reads; when that is not enough it forgets nothing
// (the call is denied, and costs the agent none of its counts).
func (l *Ledger) makeRoom(o *owner, missing, missingSessions int, at int64, window time.Duration, keep *[maxCallCounters]*series) error {
	var victims [2 + maxCallCounters]*series // at most 2 past the share and 6 past the cap
	n := 0
	taken := func(s *series) bool {
		return kept(s, keep) || slices.Contains(victims[:n], s)
	}
	var own *series // the next of o's session counters to take
	if o != nil {
		own = o.tail
	}
	take := func(s *series) bool {
		if n == len(victims) {
			return false
		}
		victims[n] = s
		n++
		return true
	}
	takeOwn := func() bool {
		for ; own != nil; own = own.oprev {
			if !taken(own) {
				s := own
				own = own.oprev
				return take(s)
			}
		}
		return false
	}
	if o != nil {
		for range o.n + missingSessions - l.maxSessionKeys {
			if !takeOwn() {
				return errFull
			}
		}
	}
	stale := before(at, window)
	t := l.tail
	for len(l.series)-n+missing > l.maxKeys {
		for t != nil && taken(t) {
			t = t.prev
		}
		if t != nil && t.newest() <= stale {
			if !take(t) {
				return errFull
			}
			continue
		}
		if !takeOwn() {
			return errFull
		}
	}
	for _, s := range victims[:n] {
		l.forget(s, at, window)
	}
	return nil
}

// maxCallCounters is the most counters one call is counted in: its
// agent's, its session's and the namespace's calls to its tool, and their
// tokens.
const maxCallCounters = 6

func kept(s *series, keep *[maxCallCounters]*series) bool {
	return slices.Contains(keep[:], s)
}

// forget drops s, remembering its newest call (see Ledger.lost); it counts
// as an eviction when a limit's window still reaches that call.
func (l *Ledger) forget(s *series, at int64, window time.Duration) {
	l.unlink(s)
	if o := s.owner; o != nil {
		o.unlink(s)
		o.n--
		if o.n == 0 {
			delete(l.agents, o.hash)
		}
	}
	delete(l.series, s.key)
	newest := s.newest()
	kind := s.key.kind()
	l.lost[kind] = max(l.lost[kind], newest)
	if newest > before(at, window) {
		l.evictions.Add(1)
	}
}

// Calls counts the calls to tool allowed for key in (now-window, now].
func (l *Ledger) Calls(key engine.UsageKey, tool string, window time.Duration, now time.Time) int64 {
	n, _ := l.calls(key, tool, window, now)
	return n
}

// Tokens sums the tokens of calls allowed for key in (now-window, now].
func (l *Ledger) Tokens(key engine.UsageKey, window time.Duration, now time.Time) float64 {
	n, _ := l.tokens(key, window, now)
	return n
}

// calls is Calls, and whether the count is whole: false when a counter
// forgotten (or a state file not read) may have held calls in the window.
func (l *Ledger) calls(key engine.UsageKey, tool string, window time.Duration, now time.Time) (int64, bool) {
	sk := l.keyOf(key, false)
	sk.tool = l.hash(canonical(tool))
	n, whole := l.sum(sk, window, now)
	if n >= math.MaxInt64 {
		return math.MaxInt64, whole
	}
	return int64(n), whole
}

func (l *Ledger) tokens(key engine.UsageKey, window time.Duration, now time.Time) (float64, bool) {
	return l.sum(l.keyOf(key, true), window, now)
}

// keyOf is the counter key (tool not set) reads of key use: the
// namespace's when key.Namespace, whatever its ID.
func (l *Ledger) keyOf(key engine.UsageKey, tokens bool) seriesKey {
	if key.Namespace {
		return seriesKey{namespace: true, tokens: tokens}
	}
	return seriesKey{session: key.Session, tokens: tokens, id: l.hash(canonical(key.ID))}
}

// Evictions counts counters forgotten while they still held calls a
// limit's window reaches.
func (l *Ledger) Evictions() uint64 { return l.evictions.Load() }

// Keys is how many counters the ledger holds.
func (l *Ledger) Keys() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.series)
}

func (l *Ledger) sum(sk seriesKey, window time.Duration, now time.Time) (float64, bool) {
	if window <= 0 {
		return 0, true
	}
	to := nanos(now)
	from := before(to, window)
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.series[sk]
	if s == nil {
		return 0, l.lost[sk.kind()] <= from
	}
	return s.sum(from, to), s.gapUntil <= from
}

// touch marks s the most recently recorded, in the ledger's list and its
// owner's. Callers hold mu.
func (l *Ledger) touch(s *series) {
	if s.prev != nil || l.head == s {
		l.unlink(s)
	}
	s.next, l.head = l.head, s
	if s.next != nil {
		s.next.prev = s
	}
	if l.tail == nil {
		l.tail = s
	}
	if o := s.owner; o != nil {
		if s.oprev != nil || o.head == s {
			o.unlink(s)
		}
		s.onext, o.head = o.head, s
		if s.onext != nil {
			s.onext.oprev = s
		}
		if o.tail == nil {
			o.tail = s
		}
	}
}

func (l *Ledger) unlink(s *series) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = nil, nil
}

func (o *owner) unlink(s *series) {
	if s.oprev != nil {
		s.oprev.onext = s.onext
	} else {
		o.head = s.onext
	}
	if s.onext != nil {
		s.onext.oprev = s.oprev
	} else {
		o.tail = s.oprev
	}
	s.oprev, s.onext = nil, nil
}

// The times a ledger can hold: UnixNano is defined only in between. The
// lowest leaves room below it for the longest window, so a window ending
// at a clamped time still holds what was recorded there.
const (
	minNanos = math.MinInt64 + 2*int64(engine.MaxLimitWindow)
	maxNanos = math.MaxInt64
)

var (
	minTime = time.Unix(0, minNanos)
	maxTime = time.Unix(0, maxNanos)
)

// before is at-d (d > 0), stopping at the oldest time rather than wrapping.
func before(at int64, d time.Duration) int64 {
	if at < math.MinInt64+int64(d) {
		return math.MinInt64
	}
	return at - int64(d)
}

// nanos is t in Unix nanoseconds, clamped to what an int64 holds.
func nanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return minNanos
	case t.After(maxTime):
		return maxNanos
	}
	return t.UnixNano()
}

// maxNameBytes is the longest name a counter keeps as it is; a longer one
// is kept as its SHA-256, so that a long name costs no more memory (nor
// state file) than a short one.
const maxNameBytes = 64

// canonical is the name a ledger keys and keeps for s: s itself, or, past
// maxNameBytes, its SHA-256 behind a NUL (no name kept as it is is that
// long, so the two never meet).
func canonical(s string) string {
	if len(s) <= maxNameBytes {
		return s // inlined: most names are short, and cost nothing
	}
	return digest(s)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "\x00sha256:" + hex.EncodeToString(sum[:])
}

// hash is how the ledger keys a canonical name.
func (l *Ledger) hash(s string) uint64 { return maphash.String(l.seed, s) }
