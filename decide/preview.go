package decide

import "github.com/toolgate/toolgate/engine"

// Previews decide what a request would get without deciding it: nothing
// is counted, logged or recorded in the ledger. The MCP proxy previews
// calls to filter the tool lists it relays; both previews bind the
// sidecar's identity first, as Decide does.

// DeniedByRule tells whether c (rules the caller compiled from the served
// bundle, e.g. its argument-free denials) denies req by a rule: not by a
// code such as NO_POLICIES.
func (d *Decider) DeniedByRule(c *engine.Compiled, req engine.Request) bool {
	st := d.state.Load()
	st.binding.fill(req)
	res := c.Evaluate(req, engine.EvalOptions{ServiceAccount: st.ServiceAccount})
	return res.Decision == engine.Deny && res.Code == "" && res.MatchedRuleID != ""
}

// Frozen tells whether the served bundle (with the freezes watched
// through the API) freezes the agent of req, or leaves it unregistered:
// the checks that come before any rule.
func (d *Decider) Frozen(req engine.Request) bool {
	st := d.state.Load()
	if st.Compiled == nil {
		return false
	}
	if st.binding.unregistered {
		return true
	}
	st.binding.fill(req)
	return st.Compiled.Evaluate(req, engine.EvalOptions{ServiceAccount: st.ServiceAccount, Now: d.cfg.Now}).Code == engine.CodeAgentFrozen
}
