package engine

import (
	"slices"
	"time"

	"github.com/toolgate/toolgate/engine/internal/fold"
)

// The two levels of a bundle (ClusterPolicies, then the namespace's
// Policies), PolicyExceptions and shadow (Audit) policies. Each level is
// decided as a bundle of one level always was; the decision is then the
// most restrictive of the two (deny > warn > audit > allow), so a
// namespace cannot loosen what a ClusterPolicy decides.

// cexception is a compiled Exception.
type cexception struct {
	name     string
	cluster  bool // exempts from a ClusterPolicy
	policy   string
	rules    []string
	agents   map[string]bool // FoldKey of each agent id
	accounts []string        // service accounts, compared exactly
	expires  time.Time
}

// applies tells whether the exception exempts this call at now.
func (x *cexception) applies(agent string, agentOK bool, serviceAccount string, now time.Time) bool {
	if !now.Before(x.expires) {
		return false
	}
	if agentOK && len(x.agents) > 0 && x.agents[fold.Key(agent)] {
		return true
	}
	return serviceAccount != "" && slices.Contains(x.accounts, serviceAccount)
}

// shadowPolicy is an Audit policy compiled on its own.
type shadowPolicy struct {
	kind, id string
	c        *Compiled
}

// splitShadows takes the Audit policies out of ps: each is compiled alone
// (with the bundle's exceptions), so what it would decide is its own
// verdict, whatever else the bundle holds.
func splitShadows(ps []Policy, exceptions []Exception) (enforcing []Policy, shadows []shadowPolicy, diags []Diagnostic) {
	ps = slices.Clone(ps)
	slices.SortStableFunc(ps, comparePolicies) // shadows in evaluation order
	for i := range ps {
		p := ps[i]
		if !p.Audit() {
			enforcing = append(enforcing, p)
			continue
		}
		p.Mode = ""
		sc, d := Compile(Bundle{Policies: []Policy{p}, Exceptions: exceptions})
		diags = append(diags, d...)
		sp := shadowPolicy{id: p.ID, c: sc}
		if p.Cluster() {
			sp.kind = KindClusterPolicy
		}
		shadows = append(shadows, sp)
	}
	return enforcing, shadows, diags
}

// compileLevels marks each policy's level, where the namespace's begins,
// and attaches the exceptions to the rules they exempt. Policies are in
// evaluation order, the cluster level first.
func (c *Compiled) compileLevels(exceptions []Exception) {
	c.nsStart = len(c.policies)
	for i := range c.policies {
		if !c.policies[i].cluster {
			c.nsStart = i
			break
		}
	}
	if c.nsStart > 0 {
		for i := range c.policies {
			c.policies[i].kind = KindPolicy
			if c.policies[i].cluster {
				c.policies[i].kind = KindClusterPolicy
			}
		}
	}
	exceptions = slices.Clone(exceptions)
	sortExceptions(exceptions) // by name: ExceptionApplied names the first
	for xi := range exceptions {
		x := &exceptions[xi]
		cx := cexception{name: x.Name, cluster: x.PolicyKind == KindClusterPolicy, policy: x.Policy, rules: x.RuleIDs,
			accounts: x.ServiceAccounts, expires: x.ExpiresAt}
		for _, a := range x.AgentIDs {
			if cx.agents == nil {
				cx.agents = map[string]bool{}
			}
			cx.agents[fold.Key(a)] = true
		}
		idx := int32(len(c.exceptions))
		c.exceptions = append(c.exceptions, cx)
		for pi := range c.policies {
			p := &c.policies[pi]
			if p.id != x.Policy || p.cluster != (x.PolicyKind == KindClusterPolicy) {
				continue
			}
			for ri := range p.rules {
				if slices.Contains(x.RuleIDs, p.rules[ri].id) {
					p.rules[ri].exceptions = append(p.rules[ri].exceptions, idx)
				}
			}
		}
	}
}

// exemptBy is the exception in force that exempts this call from r, or
// ""; the first one found in the evaluation is remembered for
// ExceptionApplied.
func (e *run) exemptBy(r *crule) string {
	if e.noExceptions {
		return ""
	}
	agent, ok := e.s.req[FieldAgentID].(string)
	for _, xi := range r.exceptions {
		x := &e.c.exceptions[xi]
		if x.applies(agent, ok, e.serviceAccount, e.clk.start) {
			if e.exempted == "" {
				e.exempted = x.name
			}
			return x.name
		}
	}
	return ""
}

// level is one level's outcome: a verdict, or its first policy's default.
type level struct {
	v     verdict
	first *cpolicy // nil: the level has no policy
}

func (l *level) defaultDeny() bool { return !l.v.set() && l.first != nil && l.first.defaultDeny }

// decideLevels writes the most restrictive of the two levels into out:
// any deny (a verdict or a default) wins, the cluster level's first;
// otherwise the stronger effect, a tie to the namespace's (the narrower
// scope, as a later policy's verdict wins within a level).
func (e *run) decideLevels(cluster, ns *level, out *Result) {
	for _, l := range [2]*level{cluster, ns} {
		if l.first != nil && l.defaultDeny() {
			out.Decision, out.Reason, out.Warnings = Deny, l.first.defaultReason, e.s.warningList()
			out.MatchedPolicyKind = l.first.kind
			return
		}
	}
	switch {
	case cluster.v.set() && (!ns.v.set() || effectRank(cluster.v.effect()) > effectRank(ns.v.effect())):
		cluster.v.fill(out, e.s)
	case ns.v.set():
		ns.v.fill(out, e.s)
	default:
		out.Decision, out.Warnings = Allow, e.s.warningList()
		if ns.first != nil {
			out.MatchedPolicyKind = ns.first.kind
		} else if cluster.first != nil {
			out.MatchedPolicyKind = cluster.first.kind
		}
	}
}

// shadow records what each Audit policy would have decided on its own.
func (c *Compiled) shadow(req Request, opts *EvalOptions, out *Result) {
	if len(c.shadows) == 0 {
		return
	}
	o := *opts
	o.Explain = false
	out.Shadow = make([]ShadowVerdict, 0, len(c.shadows))
	for i := range c.shadows {
		sp := &c.shadows[i]
		r := sp.c.Evaluate(req, o)
		out.Shadow = append(out.Shadow, ShadowVerdict{Kind: sp.kind, Policy: sp.id, Decision: r.Decision, Rule: r.MatchedRuleID})
	}
}

// exemptTraced tells whether an exception exempts this call from r (whose
// filters held), and marks r's trace entry, when r was just traced, as not
// matched for that exception.
func (e *run) exemptTraced(r *crule) bool {
	name := e.exemptBy(r)
	if name == "" {
		return false
	}
	if n := len(e.tr.rules); e.tr.on && n > 0 && e.tr.rules[n-1].RuleID == r.id && e.tr.rules[n-1].Matched {
		e.tr.rules[n-1].Matched, e.tr.rules[n-1].Exception = false, name
	}
	return true
}

// responsible is the exception ExceptionApplied names when the decision
// without exceptions (without) differs: the first by name, among those in
// force for this call, that exempts from without's deciding rule; else
// from any rule of the deciding policy of out (an exempted rule bound to a
// resource leaves an implicit deny); else the first in force at all.
func (c *Compiled) responsible(req Request, serviceAccount string, now time.Time, out, without *Result) string {
	agent, ok := req[FieldAgentID].(string)
	pick := func(want func(x *cexception) bool) string {
		for i := range c.exceptions {
			if x := &c.exceptions[i]; x.applies(agent, ok, serviceAccount, now) && want(x) {
				return x.name
			}
		}
		return ""
	}
	names := func(r *Result) func(x *cexception) bool {
		return func(x *cexception) bool {
			return x.policy == r.MatchedPolicyID && x.cluster == (r.MatchedPolicyKind == KindClusterPolicy)
		}
	}
	if without.MatchedRuleID != "" {
		in := names(without)
		if n := pick(func(x *cexception) bool { return in(x) && slices.Contains(x.rules, without.MatchedRuleID) }); n != "" {
			return n
		}
	}
	if out.MatchedPolicyID != "" {
		if n := pick(names(out)); n != "" {
			return n
		}
	}
	return pick(func(*cexception) bool { return true })
}
