// Package usage counts allowed tool calls over trailing windows, for the
// engine's rateLimit and tokenBudget conditions. The sidecar records every
// call it allows; `toolgate eval --history` replays a file into the same
// Ledger, so both count alike.
package usage

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
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

// Bounds on the caps: a cap of one event could not merge, and past these
// a value is a typo rather than a tuning.
const (
	MinEventsPerKey = 2
	MaxKeysLimit    = 1 << 20
	MaxEventsLimit  = 1 << 20
)

// Ledger counts allowed calls: per key (an agent or a session, as
// engine.UsageKeys names them) the calls to each tool, and the tokens of
// all tools. It implements engine.Usage and is safe for concurrent use.
//
// Memory is bounded. Each counter (a key's calls to one tool, or a key's
// tokens) holds at most maxEvents events: past it, events merge into
// their next neighbours, stamped with the later time, so a count can only
// be over-estimated (a limit fails closed), never under-estimated; the
// events merged are those whose times move least relative to their age,
// so the error stays a small fraction of a window (see series.merge). At most
// maxKeys counters are kept: past it, the one recorded least recently is
// forgotten and counted in Evictions (its key starts again from nothing).
// Events older than engine.MaxLimitWindow, which no window reaches, are
// dropped. Keys and tool names are kept as 64-bit hashes under a random
// per-ledger seed, so a long name costs no memory; two names sharing a
// hash would share a counter, which again only over-estimates.
type Ledger struct {
	maxKeys, maxEvents int
	seed               maphash.Seed

	mu     sync.RWMutex
	series map[seriesKey]*series
	// head is the most recently recorded counter, tail the least.
	head, tail *series
	scratch    scratch

	evictions atomic.Uint64
	// decideMu makes deciding and counting one step (Decide).
	decideMu sync.Mutex
}

// seriesKey names one counter: a key's calls to one tool, or (tokens set,
// tool 0) its tokens.
type seriesKey struct {
	session bool
	tokens  bool
	id      uint64
	tool    uint64
}

// New returns a ledger holding at most maxKeys counters of at most
// maxEvents events each.
func New(maxKeys, maxEvents int) (*Ledger, error) {
	if err := CheckCaps(maxKeys, maxEvents); err != nil {
		return nil, err
	}
	return &Ledger{maxKeys: maxKeys, maxEvents: maxEvents, seed: maphash.MakeSeed(),
		series: make(map[seriesKey]*series)}, nil
}

// CheckCaps reports caps New would refuse, naming them as the sidecar's
// flags do.
func CheckCaps(maxKeys, maxEvents int) error {
	var errs []error
	if maxKeys < 1 || maxKeys > MaxKeysLimit {
		errs = append(errs, fmt.Errorf("--usage-max-keys must be from 1 to %d, not %d", MaxKeysLimit, maxKeys))
	}
	if maxEvents < MinEventsPerKey || maxEvents > MaxEventsLimit {
		errs = append(errs, fmt.Errorf("--usage-max-events-per-key must be from %d to %d, not %d", MinEventsPerKey, MaxEventsLimit, maxEvents))
	}
	return errors.Join(errs...)
}

var _ engine.Usage = (*Ledger)(nil)

// Record counts one allowed call at now, under both the keys it counts
// under (its agent and its session): one call to its tool_name, and its
// tokens (engine.CallTokens).
func (l *Ledger) Record(req engine.Request, now time.Time) {
	agent, session := engine.UsageKeys(req)
	tool, _ := req[engine.FieldToolName].(string)
	tokens := engine.CallTokens(req)
	at := nanos(now)
	horizon := before(at, engine.MaxLimitWindow)
	toolHash := l.hash(tool)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range [2]engine.UsageKey{agent, session} {
		sk := seriesKey{session: k.Session, id: l.hash(k.ID)}
		calls := sk
		calls.tool = toolHash
		l.counter(calls, horizon).add(at, 1, horizon, l.maxEvents, &l.scratch)
		if tokens > 0 {
			sk.tokens = true
			l.counter(sk, horizon).add(at, tokens, horizon, l.maxEvents, &l.scratch)
		}
	}
}

// Calls counts the calls to tool allowed for key in (now-window, now].
func (l *Ledger) Calls(key engine.UsageKey, tool string, window time.Duration, now time.Time) int64 {
	sk := seriesKey{session: key.Session, id: l.hash(key.ID), tool: l.hash(tool)}
	n := l.sum(sk, window, now)
	if n >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

// Tokens sums the tokens of calls allowed for key in (now-window, now].
func (l *Ledger) Tokens(key engine.UsageKey, window time.Duration, now time.Time) float64 {
	return l.sum(seriesKey{session: key.Session, tokens: true, id: l.hash(key.ID)}, window, now)
}

// Evictions counts counters forgotten at the key cap while they still
// held events a window could reach.
func (l *Ledger) Evictions() uint64 { return l.evictions.Load() }

// Keys is how many counters the ledger holds.
func (l *Ledger) Keys() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.series)
}

func (l *Ledger) sum(sk seriesKey, window time.Duration, now time.Time) float64 {
	if window <= 0 {
		return 0
	}
	to := nanos(now)
	from := before(to, window)
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.series[sk]
	if s == nil {
		return 0
	}
	return s.sum(from, to)
}

// counter finds or makes sk's series and marks it the most recently used,
// evicting the least recently used one at the cap. Callers hold mu.
func (l *Ledger) counter(sk seriesKey, horizon int64) *series {
	s := l.series[sk]
	if s == nil {
		if len(l.series) >= l.maxKeys {
			l.evict(horizon)
		}
		s = &series{key: sk}
		l.series[sk] = s
	} else {
		l.unlink(s)
	}
	s.next, l.head = l.head, s
	if s.next != nil {
		s.next.prev = s
	}
	if l.tail == nil {
		l.tail = s
	}
	return s
}

// evict forgets the least recently recorded counter; it counts as an
// eviction only when it still held events some window could reach.
func (l *Ledger) evict(horizon int64) {
	old := l.tail
	l.unlink(old)
	delete(l.series, old.key)
	if old.newest() > horizon {
		l.evictions.Add(1)
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

// hash is how the ledger keeps a key's id or a tool name.
func (l *Ledger) hash(s string) uint64 { return maphash.String(l.seed, s) }
