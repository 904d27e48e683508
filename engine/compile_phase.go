package engine

import (
	"slices"
)

// Result rules (issue 28) are compiled with the call rules of their policy,
// in spec order, and then split: c.policies keeps, per policy, the indexes
// of its call rules, c.results those of its result rules, both over the
// same compiled rules. A bundle without result rules has no result views,
// and its call views are the policies as they always were.

// checkPhase reports what a rule of its phase may not have: redact on a
// call (there is no output to redact), ask on a result (the tool has run:
// nothing is left to approve), and a rate limit or token budget on a
// result (the call was counted when it was decided).
func checkPhase(d *diagnoser, ri int, r *Rule) {
	switch r.Phase {
	case "", PhaseCall:
		if Effect(r.Effect) == EffectRedact {
			d.rulef(ri, r.ID, "effect", "effect redact is only for result rules (phase: result): a call has no output to redact")
		}
	case PhaseResult:
		if Effect(r.Effect) == EffectAsk {
			d.rulef(ri, r.ID, "effect", "effect ask is only for call rules: a result rule runs after the tool did, when there is nothing left to approve (use deny or redact)")
		}
		if w := r.When; w != nil && w.RateLimit != nil {
			d.add(ri, r.ID, -1, ruleAt(ri).Child("when").Child("rateLimit"), "rateLimit is only for call rules: a result rule counts nothing (its call was counted when it was decided)", nil)
		}
		if w := r.When; w != nil && w.TokenBudget != nil {
			d.add(ri, r.ID, -1, ruleAt(ri).Child("when").Child("tokenBudget"), "tokenBudget is only for call rules: a result rule counts nothing (its call was counted when it was decided)", nil)
		}
	default:
		d.rulef(ri, r.ID, "phase", "must be call or result, not %q", r.Phase)
	}
}

// isResultRule tells whether r is a result rule, or claims a phase that
// is not call (then its policy does not compile, and a result evaluation
// must reach it to deny).
func isResultRule(r *Rule) bool { return r.Phase != "" && r.Phase != PhaseCall }

// usesResults tells whether r needs SchemaVersionResults: a result rule, a
// redact (valid on a result rule only, but a bundle carrying one must not
// reach a sidecar that would read it as a call rule) or a detect test.
func (r *Rule) usesResults() bool {
	return r.Phase != "" || Effect(r.Effect) == EffectRedact || slices.ContainsFunc(r.Conditions, Condition.detects)
}

// detects tells whether c or a member of its groups is a detect test.
func (c Condition) detects() bool {
	return c.Operator == opNameDetect || slices.ContainsFunc(c.Any, Condition.detects) || slices.ContainsFunc(c.All, Condition.detects)
}

// splitPhases makes c.policies the call views and, when a rule is a result
// rule, c.results the result views.
func (c *Compiled) splitPhases() {
	for pi := range c.policies {
		p := &c.policies[pi]
		if slices.ContainsFunc(p.rules, func(r crule) bool { return r.result }) {
			c.hasResultRules = true
		}
	}
	if !c.hasResultRules {
		return
	}
	c.results = make([]cpolicy, len(c.policies))
	for pi := range c.policies {
		p := &c.policies[pi]
		c.results[pi] = p.view(true)
		if slices.ContainsFunc(p.rules, func(r crule) bool { return r.result }) {
			c.policies[pi] = p.view(false)
		}
	}
}

// view is p restricted to its result rules (result) or its call rules.
// A result view has no default deny: a result no result rule judged goes
// on (its call was already allowed).
func (p *cpolicy) view(result bool) cpolicy {
	v := *p
	keep := func(l []int32) []int32 {
		var out []int32
		for _, i := range l {
			if p.rules[i].result == result {
				out = append(out, i)
			}
		}
		return out
	}
	v.byTool = map[string][]int32{}
	for tool, l := range p.byTool {
		if k := keep(l); len(k) > 0 {
			v.byTool[tool] = k
		}
	}
	v.anyTool = keep(p.anyTool)
	v.toolLevel = keep(p.toolLevel)
	v.byResource = nil
	for typ, names := range p.byResource {
		for name, l := range names {
			if k := keep(l); len(k) > 0 {
				if v.byResource == nil {
					v.byResource = map[string]map[string][]int32{}
				}
				if v.byResource[typ] == nil {
					v.byResource[typ] = map[string][]int32{}
				}
				v.byResource[typ][name] = k
			}
		}
	}
	v.inPhase = []int32{}
	for i := range p.rules {
		if p.rules[i].result == result {
			v.inPhase = append(v.inPhase, int32(i))
		}
	}
	if result {
		v.defaultDeny, v.defaultReason = false, ""
	}
	return v
}

// indexTools builds the per-tool index of ps (see Compiled.byTool) and
// marks the policies a call to another tool skips.
func indexTools(ps []cpolicy) map[string][]toolHit {
	byTool := map[string][]toolHit{}
	for pi := range ps {
		p := &ps[pi]
		for tool, rules := range p.byTool {
			byTool[tool] = append(byTool[tool], toolHit{policy: int32(pi), rules: rules})
		}
		p.byTool = nil // byTool holds them now
		p.skippable = p.compileError == "" && len(p.anyTool) == 0 && p.byResource == nil
	}
	return byTool
}

// HasResultRules tells whether c has a result rule (or a rule claiming a
// phase that does not compile, which a result evaluation must reach to
// deny), an Audit policy's included: without one, a result needs no
// judging and the MCP proxy forwards it untouched. True for a nil c (no
// bundle), whose every decision is a deny.
func (c *Compiled) HasResultRules() bool {
	if c == nil || c.hasResultRules {
		return true
	}
	return slices.ContainsFunc(c.shadows, func(sp shadowPolicy) bool { return sp.c.hasResultRules })
}
