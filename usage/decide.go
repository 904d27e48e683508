package usage

import (
	"time"

	"github.com/toolgate/toolgate/engine"
)

// Decide evaluates req with c, reading and counting usage in this ledger:
// the one way the sidecar and toolgate's in-process client decide. While
// c has a rateLimit or tokenBudget (engine.Compiled.UsesUsage), deciding
// and counting an allowed call (allow, warn or audit) are one step under
// the ledger's decision lock: calls decided at once would otherwise all
// read the count from before any of them, and together pass the limit.
// The call is counted at opts.Now (the real clock when nil); the deferred
// unlock holds even if evaluation panics. Without limits nothing reads the
// counts, so nothing is counted and no lock is taken: counting starts when
// a bundle with limits is loaded.
//
// An allowed call is not allowed when it cannot be counted: the error
// (wrapping ErrUnavailable) says why, and the caller denies. That is when
// a limit read a count the ledger cannot vouch for (a counter it forgot,
// or a state file it could not read, may have held calls in the window),
// when the call needs a counter and the ledger is full of counters limits
// still read, or when the state file cannot be written. A deny stays the
// deny it is.
func (l *Ledger) Decide(c *engine.Compiled, req engine.Request, opts engine.EvalOptions) (engine.Result, error) {
	if !c.UsesUsage() {
		return c.Evaluate(req, opts), nil
	}
	l.decideMu.Lock()
	defer l.decideMu.Unlock()
	l.reading = reading{l: l}
	opts.Usage = &l.reading
	res := c.Evaluate(req, opts)
	return res, l.countAllowed(c, req, res, opts)
}

// countAllowed counts res's call when it is allowed, under the decision
// lock: Decide's and DecideShared's last step. An allowed call whose limits
// read a count the ledger cannot vouch for is not counted but refused
// (errPartial); a deny stays the deny it is.
func (l *Ledger) countAllowed(c *engine.Compiled, req engine.Request, res engine.Result, opts engine.EvalOptions) error {
	if res.Decision != engine.Allow {
		return nil
	}
	if l.reading.partial {
		return errPartial
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	return l.record(keysOf(req, c.UsesNamespaceUsage()), nanos(now()), c.UsageWindow())
}

var errPartial = &unavailable{"a rate limit or token budget could not be counted: its window reaches back to calls this sidecar may no longer hold (a counter forgotten at --usage-max-keys, or a usage state file that could not be read); denied to fail closed until that window has passed"}

// unavailable is an ErrUnavailable with its reason alone as its message:
// the reason a deny gives.
type unavailable struct{ reason string }

func (e *unavailable) Error() string        { return e.reason }
func (e *unavailable) Is(target error) bool { return target == ErrUnavailable }

// reading is the engine.Usage one decision reads through: the ledger's
// counts, noting any it cannot vouch for.
type reading struct {
	l       *Ledger
	partial bool
}

func (r *reading) Calls(key engine.UsageKey, tool string, window time.Duration, now time.Time) int64 {
	n, whole := r.l.calls(key, tool, window, now)
	r.partial = r.partial || !whole
	return n
}

func (r *reading) Tokens(key engine.UsageKey, window time.Duration, now time.Time) float64 {
	n, whole := r.l.tokens(key, window, now)
	r.partial = r.partial || !whole
	return n
}

// Count counts req as an allowed call at now, as Decide does for a call it
// allows: for a call allowed later than it was decided (an approval of an
// ask). Without limits in c nothing is counted.
func (l *Ledger) Count(c *engine.Compiled, req engine.Request, now time.Time) error {
	if !c.UsesUsage() {
		return nil
	}
	l.decideMu.Lock()
	defer l.decideMu.Unlock()
	return l.record(keysOf(req, c.UsesNamespaceUsage()), nanos(now), c.UsageWindow())
}
