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
func (l *Ledger) Decide(c *engine.Compiled, req engine.Request, opts engine.EvalOptions) engine.Result {
	if !c.UsesUsage() {
		return c.Evaluate(req, opts)
	}
	opts.Usage = l
	l.decideMu.Lock()
	defer l.decideMu.Unlock()
	res := c.Evaluate(req, opts)
	if res.Decision == engine.Allow {
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		l.Record(req, now())
	}
	return res
}
