package engine

import (
	"fmt"

	"github.com/toolgate/toolgate/engine/internal/schedule"
	"github.com/toolgate/toolgate/engine/internal/stringset"
)

// mode is where in an evaluation a rule is being checked: the ordered scan,
// a tiered policy's tool level, or one of its per-resource evaluations.
type mode uint8

const (
	modeOrdered mode = iota
	modeTool
	modeResource
)

// failed returns the first of r's filters that does not hold for the
// request in s (filterNone: r matches). The caller has reached r in mode m;
// in modeResource, s.cur is the resource under evaluation.
func (c *Compiled) failed(s *scratch, r *crule, m mode) filter {
	if r.filtered {
		if f := s.gatewayFailed(r, m); f != filterNone {
			return f
		}
	}
	for i := range r.conditions {
		if !c.holds(s, &r.conditions[i]) {
			return filterConditions
		}
	}
	return filterNone
}

func (s *scratch) gatewayFailed(r *crule, m mode) filter {
	v := s.loadView()
	if r.subjects != nil && !v.subjectsHold(r.subjects, r.restrictive) {
		return filterSubjects
	}
	if r.targets != nil && !s.targetsHold(r.targets, m) {
		return filterTargets
	}
	if r.sel != nil && !s.selectHolds(r.sel, m) {
		return filterSelect
	}
	if r.when != nil && !s.whenHolds(r.when, m) {
		return filterWhen
	}
	return filterNone
}

func (s *scratch) loadView() *view {
	if !s.view.ready {
		s.view.load(s.req)
	}
	return &s.view
}

// subjectsHold: the agent or one of the roles is listed. A deny (or an
// ask) also holds when an identity it is scoped by is missing, so missing
// identity never lifts a deny or skips an approval.
func (v *view) subjectsHold(cs *csubjects, deny bool) bool {
	if !cs.agents.Empty() {
		if !v.agentOK {
			if deny {
				return true
			}
		} else if cs.agents.Has(v.agentFold) {
			return true
		}
	}
	if !cs.roles.Empty() {
		if !v.rolesOK {
			return deny
		}
		for _, x := range v.roles {
			if role, ok := x.(string); ok && cs.roles.Has(role) {
				return true
			}
		}
	}
	return false
}

func (s *scratch) targetsHold(t *ctargets, m mode) bool {
	v := &s.view
	if !t.servers.Empty() && !(v.serverOK && t.servers.Has(v.server)) {
		return false
	}
	if !t.tools.Empty() && !t.tools.Has(v.tool) {
		return false
	}
	if t.resources == nil {
		return true
	}
	switch m {
	case modeResource:
		return true // the rule was found by the resource's index entry
	case modeTool:
		return false
	}
	for i := range v.resources {
		if touches(t.resources, &v.resources[i]) {
			return true
		}
	}
	return false
}

func touches(targets map[string]stringset.Set, r *resource) bool {
	names, ok := targets[r.typ]
	return ok && names.Has(r.name)
}

func (s *scratch) selectHolds(sel *cselect, m mode) bool {
	v := &s.view
	if !sel.action.Empty() && !sel.action.Has(v.action) {
		return false
	}
	if !sel.sideEffect.Empty() && !(v.sideOK && sel.sideEffect.Has(v.sideEffect)) {
		return false
	}
	switch {
	case sel.toolMatcher != nil:
		// A tool_name that is not a string is missing, as for matches.
		if !v.toolOK || !sel.toolMatcher.Match(v.tool) {
			return false
		}
	case sel.tool != "" && sel.tool != v.tool:
		return false
	}
	if sel.resourceType != "" && !s.resourceTypeIs(sel.resourceType, m) {
		return false
	}
	for i := range sel.context {
		got, ok := v.context[sel.context[i].key]
		if !ok || !sel.context[i].value.Equal(got) {
			return false
		}
	}
	return true
}

// resourceTypeIs: the resource under evaluation has type typ; at a tiered
// policy's tool level never; in an ordered policy, any touched resource.
func (s *scratch) resourceTypeIs(typ string, m mode) bool {
	v := &s.view
	switch m {
	case modeResource:
		return v.resources[s.cur].typ == typ
	case modeTool:
		return false
	}
	for i := range v.resources {
		if v.resources[i].typ == typ {
			return true
		}
	}
	return false
}

func (s *scratch) whenHolds(w *cwhen, m mode) bool {
	v := &s.view
	if w.schedule != nil && !s.inSchedule(w.schedule) {
		return false
	}
	if !w.environments.Empty() && !(v.envOK && w.environments.Has(v.env)) {
		return false
	}
	if !w.confidence.Empty() && !w.confidence.Has(v.confidence) {
		return false
	}
	if !w.sensitivity.Empty() && !s.tagged(&w.sensitivity, m) {
		return false
	}
	if l := w.rateLimit; l != nil {
		var used int64
		switch {
		case l.shared && s.shared != nil:
			used = int64(s.shared.Shared(s.sharedQuery(l, v.tool, false, 1)))
		case s.usage != nil:
			used = s.usage.Calls(s.limitKey(l), v.tool, l.window, s.now)
		}
		if used < l.max {
			return false
		}
	}
	if l := w.tokenBudget; l != nil {
		used, tokens := 0.0, CallTokens(s.req)
		switch {
		case l.shared && s.shared != nil:
			used = s.shared.Shared(s.sharedQuery(l, "", true, tokens))
		case s.usage != nil:
			used = s.usage.Tokens(s.limitKey(l), l.window, s.now)
		}
		if used+tokens <= float64(l.max) {
			return false
		}
	}
	return true
}

// limitKey is the key l counts under for this call.
func (s *scratch) limitKey(l *climit) UsageKey {
	if l.namespace {
		return UsageKey{Namespace: true}
	}
	return s.usageKey(l.session)
}

// sharedQuery names l's shared counter for this call (tool "" for a token
// budget) and what the call adds to it.
func (s *scratch) sharedQuery(l *climit, tool string, tokens bool, add float64) SharedQuery {
	return SharedQuery{Limit: l.id, Key: s.limitKey(l), Tool: tool, Tokens: tokens, Window: l.window,
		Max: l.max, Add: add, FailOpen: l.failOpen}
}

func (s *scratch) inSchedule(windows []schedule.Window) bool {
	for i := range windows {
		if windows[i].HoldsAt(s.now) {
			return true
		}
	}
	return false
}

// tagged: the call's sensitivity tags, or those of the resource under
// evaluation (any touched resource outside one), meet the listed ones.
func (s *scratch) tagged(listed *stringset.Set, m mode) bool {
	v := &s.view
	if anyListed(listed, v.tags) {
		return true
	}
	switch m {
	case modeResource:
		return anyListed(listed, v.resources[s.cur].tags)
	case modeTool:
		// The tool level reads every touched resource's tags, as ordered
		// policies do: only the per-resource evaluation narrows to one.
	}
	for i := range v.resources {
		if anyListed(listed, v.resources[i].tags) {
			return true
		}
	}
	return false
}

func anyListed(listed *stringset.Set, tags []any) bool {
	for _, t := range tags {
		if str, ok := t.(string); ok && listed.Has(str) {
			return true
		}
	}
	return false
}

// verdict is what one policy (or one evaluation of a tiered policy)
// contributes: a rule, or a resource's implicit deny. It is kept to a few
// words so it travels in registers: the scan passes one per policy.
type verdict struct {
	policy   *cpolicy
	rule     *crule // nil for an implicit deny (and for no verdict)
	res      int32  // index in the view's resources, -1 at tool level
	implicit bool
}

// sticks tells whether the verdict is an ask or a redact rule's, which
// decide unless a deny does.
func (v *verdict) sticks() bool { return v.rule != nil && v.rule.sticky }

// set tells whether there is a verdict at all.
func (v *verdict) set() bool { return v.rule != nil || v.implicit }

func (v *verdict) effect() Effect {
	if v.implicit {
		return EffectDeny
	}
	return v.rule.effect
}

func (v *verdict) stronger(than *verdict) bool {
	return !than.set() || effectRank(v.effect()) > effectRank(than.effect())
}

func (v *verdict) reason(s *scratch) string {
	if v.implicit {
		r := &s.view.resources[v.res]
		return fmt.Sprintf("no rule bound to resource %s/%s matched in policy %q", r.typ, r.name, v.policy.id)
	}
	return v.rule.reason
}

// fill writes the deciding verdict into the result.
func (v *verdict) fill(out *Result, s *scratch) {
	out.Decision, out.Effect = Allow, v.effect()
	out.MatchedPolicyID, out.MatchedPolicyVersion = v.policy.id, v.policy.version
	out.MatchedPolicyKind = v.policy.kind
	out.Reason, out.Warnings = v.reason(s), s.warningList()
	switch out.Effect {
	case EffectDeny:
		out.Decision = Deny
	case EffectAsk:
		out.Decision, out.Code, out.ApprovalTimeout = Ask, CodeApprovalRequired, v.rule.approvalTimeout
	}
	if v.rule != nil {
		out.MatchedRuleID = v.rule.id
	}
	if v.implicit {
		out.Code = CodeImplicitDeny
	}
	if v.res >= 0 {
		out.MatchedResource = s.view.resources[v.res].ref()
	}
}
