package usage

import (
	"sync"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// SharedCounts is what the second pass of DecideShared reads shared limits
// from: the counts a SharedStore returned when it reserved the call, and
// whether every shared limit read could be counted.
type SharedCounts interface {
	engine.SharedUsage
	// Uncounted is why a call the second pass allowed cannot be let
	// through (it wraps ErrUnavailable): a shared limit it read has no
	// count and no failOpen. Nil when every limit read was counted.
	Uncounted() error
}

// DecideShared is Decide for a bundle with shared limits
// (engine.Compiled.UsesSharedUsage), in two passes:
//
//  1. evaluate with every shared limit answering 0, noting which it asks
//     (local limits read this ledger as in Decide);
//  2. when none was asked, that is the decision: a call no shared limit
//     reaches never waits on the store. Otherwise reserve is given the
//     queries (the caller's one round trip to the store) and the call is
//     evaluated again with the counts it returned. asked is only valid
//     until DecideShared returns.
//
// An allowed call is counted here as Decide counts it, unless the counts
// say it could not be (SharedCounts.Uncounted: the error is returned and
// the caller denies). The ledger's decision lock keeps a local limit's
// decide-and-count one step: when the first pass read a local limit it
// is held across the round trip (the store's timeout bounds it); when it
// read only shared ones, the round trip runs unlocked, so calls under
// shared limits alone wait on the store side by side, not one by one, and
// the second pass takes the lock again (a local limit it reaches is then
// read and counted in one step).
func (l *Ledger) DecideShared(c *engine.Compiled, req engine.Request, opts engine.EvalOptions, reserve func(asked []engine.SharedQuery) SharedCounts) (engine.Result, error) {
	l.decideMu.Lock()
	locked := true
	defer func() {
		if locked {
			l.decideMu.Unlock()
		}
	}()
	p := probes.Get().(*probe)
	defer p.release()
	l.reading = reading{l: l}
	local := &p.local
	*local = watched{r: &l.reading}
	opts.Usage, opts.Shared = local, p
	res := c.Evaluate(req, opts)
	if len(p.asked) > 0 {
		if !local.read {
			l.decideMu.Unlock()
			locked = false
		}
		counts := reserve(p.asked)
		if !locked {
			l.decideMu.Lock()
			locked = true
		}
		l.reading = reading{l: l}
		opts.Usage, opts.Shared = &l.reading, counts
		res = c.Evaluate(req, opts)
		if res.Decision == engine.Allow {
			if err := counts.Uncounted(); err != nil {
				return res, err
			}
		}
	}
	return res, l.countAllowed(c, req, res, opts)
}

// watched is the ledger's reading, noting whether a local limit read it.
type watched struct {
	r    *reading
	read bool
}

func (w *watched) Calls(key engine.UsageKey, tool string, window time.Duration, now time.Time) int64 {
	w.read = true
	return w.r.Calls(key, tool, window, now)
}

func (w *watched) Tokens(key engine.UsageKey, window time.Duration, now time.Time) float64 {
	w.read = true
	return w.r.Tokens(key, window, now)
}

// probe is the first pass's engine.SharedUsage: it notes each distinct
// shared counter asked and answers 0. Pooled, so a call that reaches no
// shared limit allocates nothing.
type probe struct {
	asked []engine.SharedQuery
	local watched
}

var probes = sync.Pool{New: func() any { return &probe{} }}

func (p *probe) Shared(q engine.SharedQuery) float64 {
	for i := range p.asked {
		if p.asked[i] == q {
			return 0
		}
	}
	p.asked = append(p.asked, q)
	return 0
}

func (p *probe) release() {
	clear(p.asked)
	p.local = watched{}
	p.asked = p.asked[:0]
	probes.Put(p)
}
