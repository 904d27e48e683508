package engine

// The reference's half for issue 9 (seed 001's gateway model), written from
// the issue and SPEC-9 alone, sharing no code with the engine: every filter
// re-reads the raw request, schedules convert the clock per window, limits
// scan a slice of recorded calls, and a tiered policy evaluates every rule
// once per evaluation with no index.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wasilibs/go-re2"
)

// refResult is everything the contract fixes about a result.
type refResult struct {
	refOutcome
	Effect   Effect
	Resource ResourceRef
	Reason   string
	Warnings []string
	// Kind is the level that decided, named only in a bundle with
	// ClusterPolicies.
	Kind             string
	ExceptionApplied string
	// Timeout is an ask's wait: the rule's approval.timeout, 5m unset.
	Timeout time.Duration
	Shadow  []ShadowVerdict
	// Verdicts are the verdicts of the tiered policies the scan reached,
	// one list per policy, per evaluation, as the explain trace reports
	// them.
	Verdicts [][]TraceVerdict
}

// refUsed is one earlier allowed call, as the sidecar would have recorded it.
type refUsed struct {
	At      time.Time
	Agent   string // agent_id as the call sent it ("" when absent)
	Session string
	Tool    string
	Tokens  float64
}

// refUsage is a naive Usage: a linear scan over every recorded call.
type refUsage struct {
	calls []refUsed
	// shared are the calls every sidecar of the namespace counted in the
	// shared store. With sharedOn, a store: shared limit reads them (the
	// engine through EvalOptions.Shared, refShared); without, it reads
	// calls as a local limit does (toolgate eval replaying a history).
	shared   []refUsed
	sharedOn bool
}

func (u *refUsage) owns(c refUsed, key UsageKey) bool {
	if key.Namespace {
		return true
	}
	if key.Session {
		return c.Session == key.ID
	}
	return strings.EqualFold(c.Agent, key.ID)
}

func refInWindow(at time.Time, window time.Duration, now time.Time) bool {
	return at.After(now.Add(-window)) && !at.After(now)
}

func (u *refUsage) Calls(key UsageKey, tool string, window time.Duration, now time.Time) int64 {
	var n int64
	if u == nil {
		return 0
	}
	for _, c := range u.calls {
		if u.owns(c, key) && c.Tool == tool && refInWindow(c.At, window, now) {
			n++
		}
	}
	return n
}

func (u *refUsage) Tokens(key UsageKey, window time.Duration, now time.Time) float64 {
	var n float64
	if u == nil {
		return 0
	}
	for _, c := range u.calls {
		if u.owns(c, key) && refInWindow(c.At, window, now) {
			n += c.Tokens
		}
	}
	return n
}

// refLimitHolds counts straight from the recorded calls by the request's
// own fields, not through UsageKey, so a wrong key on the engine's side
// shows as a difference.
func refLimitHolds(l *Limit, rate bool, call *refRequest, now time.Time, u *refUsage) bool {
	window, ok := refWindow(l.Window)
	if !ok {
		panic("reference: evaluating an invalid window")
	}
	var calls int64
	var tokens float64
	if u != nil {
		from := u.calls
		if l.Store == "shared" && u.sharedOn {
			from = u.shared
		}
		for _, c := range from {
			mine := strings.EqualFold(c.Agent, call.agent)
			switch l.Per {
			case "session":
				mine = c.Session == call.session
			case "namespace":
				mine = true
			}
			if !mine || !refInWindow(c.At, window, now) {
				continue
			}
			tokens += c.Tokens
			if call.toolOK && c.Tool == call.tool {
				calls++
			}
		}
	}
	if rate {
		return calls >= l.Max
	}
	return tokens+call.tokens > float64(l.Max)
}

// refWindow: a whole number of days, or a Go duration; valid in [1s, 31d].
func refWindow(s string) (time.Duration, bool) {
	var d time.Duration
	if regexp.MustCompile(`^[0-9]+d$`).MatchString(s) {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "d"))
		if err != nil || n > 31 {
			return 0, false
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, false
		}
	}
	return d, d >= time.Second && d <= 31*24*time.Hour
}

// refResource is a valid item of the request's resources.
type refResource struct {
	ref  ResourceRef
	tags []string
	raw  map[string]any
}

// refRequest is the request as the new filters read it (SPEC-9's readings).
type refRequest struct {
	req           map[string]any
	agent         string
	agentOK       bool
	roles         []string
	rolesResolved bool
	server        string
	serverOK      bool
	tool          string
	toolOK        bool
	resources     []refResource
	action        string
	sideEffect    string
	sideEffectOK  bool
	env           string
	envOK         bool
	confidence    string
	tags          []string
	context       map[string]any
	tokens        float64
	session       string
	// Issue 28: a result evaluation runs only result rules; with the
	// output truncated, their tests of output.text and output.structured
	// hold.
	result, truncated bool
}

func refStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func refRead(req map[string]any) *refRequest {
	r := &refRequest{req: req}
	r.agent, r.agentOK = req["agent_id"].(string)
	r.session, _ = req["session_id"].(string)
	r.tool, r.toolOK = req["tool_name"].(string)
	if roles, ok := req["roles"].([]any); ok {
		r.rolesResolved = true
		r.roles = refStrings(roles)
	}
	if v, present := req["server"]; present {
		r.server, r.serverOK = v.(string)
	} else if rest, ok := strings.CutPrefix(r.tool, "mcp__"); ok && r.toolOK {
		if i := strings.Index(rest, "__"); i > 0 && len(rest) > i+2 {
			r.server, r.serverOK = rest[:i], true
		}
	}
	if list, ok := req["resources"].([]any); ok {
		for _, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			typ, ok1 := m["type"].(string)
			name, ok2 := m["name"].(string)
			if !ok1 || !ok2 {
				continue
			}
			r.resources = append(r.resources, refResource{ref: ResourceRef{Type: typ, Name: name}, tags: refStrings(m["sensitivity"]), raw: m})
		}
	}
	r.action = "call"
	if a, ok := req["action"].(string); ok {
		r.action = a
	}
	r.sideEffect, r.sideEffectOK = req["side_effect"].(string)
	r.env, r.envOK = req["environment"].(string)
	r.confidence = "unknown"
	if c, ok := req["actor_confidence"].(string); ok {
		r.confidence = c
	}
	r.tags = refStrings(req["sensitivity"])
	r.context, _ = req["context"].(map[string]any)
	if f, ok := req["tokens"].(float64); ok && f > 0 && f <= 1.7976931348623157e308 {
		r.tokens = f
	}
	return r
}

// refScope is where a rule is evaluated: an ordered policy, a tiered
// policy's tool level, or one resource of a tiered policy.
type refScope struct {
	mode     string // "ordered", "tool" or "resource"
	resource *refResource
}

// refFilter is the first filter of r that fails, or "".
func refFilter(r Rule, call *refRequest, sc refScope, now time.Time, u *refUsage) string {
	switch {
	case refIsResult(r) != call.result:
		return "phase"
	case !refSubjects(r, call):
		return "subjects"
	case !refTargets(r, call, sc):
		return "targets"
	case !refSelect(r, call, sc):
		return "select"
	case !refWhen(r, call, sc, now, u):
		return "when"
	case !refConditions(r, call, sc):
		return "conditions"
	}
	return ""
}

func refSubjects(r Rule, call *refRequest) bool {
	s := r.Subjects
	if s == nil {
		return true
	}
	for _, a := range s.Agents {
		if call.agentOK && strings.EqualFold(a, call.agent) {
			return true
		}
	}
	for _, role := range s.Roles {
		if slices.Contains(call.roles, role) {
			return true
		}
	}
	// Issue 27: missing identity never skips an ask either.
	if r.Effect == "deny" || r.Effect == "ask" {
		return (len(s.Agents) > 0 && !call.agentOK) || (len(s.Roles) > 0 && !call.rolesResolved)
	}
	return false
}

func refListsResource(t ResourceTarget, res ResourceRef) bool {
	return t.Type == res.Type && slices.Contains(t.Names, res.Name)
}

func refTargets(r Rule, call *refRequest, sc refScope) bool {
	t := r.Targets
	if t == nil {
		return true
	}
	if len(t.Servers) > 0 && !(call.serverOK && slices.Contains(t.Servers, call.server)) {
		return false
	}
	if len(t.Tools) > 0 && !(call.toolOK && slices.Contains(t.Tools, call.tool)) {
		return false
	}
	if len(t.Resources) == 0 {
		return true
	}
	for _, rt := range t.Resources {
		switch sc.mode {
		case "resource":
			if refListsResource(rt, sc.resource.ref) {
				return true
			}
		case "ordered":
			for _, res := range call.resources {
				if refListsResource(rt, res.ref) {
					return true
				}
			}
		}
	}
	return false
}

func refSelect(r Rule, call *refRequest, sc refScope) bool {
	s := r.Select
	if s == nil {
		return true
	}
	if len(s.Action) > 0 && !slices.Contains(s.Action, call.action) {
		return false
	}
	if len(s.SideEffect) > 0 && !(call.sideEffectOK && slices.Contains(s.SideEffect, call.sideEffect)) {
		return false
	}
	if s.Tool != "" {
		if len(s.Tool) >= 2 && strings.HasPrefix(s.Tool, "/") && strings.HasSuffix(s.Tool, "/") {
			if !call.toolOK || !re2.MustCompile(s.Tool[1:len(s.Tool)-1]).MatchString(call.tool) {
				return false
			}
		} else if !call.toolOK || call.tool != s.Tool {
			return false
		}
	}
	if s.ResourceType != "" {
		found := false
		switch sc.mode {
		case "resource":
			found = sc.resource.ref.Type == s.ResourceType
		case "ordered":
			for _, res := range call.resources {
				found = found || res.ref.Type == s.ResourceType
			}
		}
		if !found {
			return false
		}
	}
	for k, lit := range s.Context {
		v, ok := call.context[k]
		if !ok || !refEqual(refDecode(lit), v) {
			return false
		}
	}
	return true
}

func refWhen(r Rule, call *refRequest, sc refScope, now time.Time, u *refUsage) bool {
	w := r.When
	if w == nil {
		return true
	}
	if len(w.Schedule) > 0 && !slices.ContainsFunc(w.Schedule, func(win Window) bool { return refInSchedule(win, now) }) {
		return false
	}
	if len(w.Environments) > 0 && !(call.envOK && slices.Contains(w.Environments, call.env)) {
		return false
	}
	if len(w.Sensitivity) > 0 {
		tags := slices.Clone(call.tags)
		if sc.mode == "resource" {
			tags = append(tags, sc.resource.tags...)
		} else {
			for _, res := range call.resources {
				tags = append(tags, res.tags...)
			}
		}
		if !slices.ContainsFunc(tags, func(t string) bool { return slices.Contains(w.Sensitivity, t) }) {
			return false
		}
	}
	if len(w.ActorConfidence) > 0 && !slices.Contains(w.ActorConfidence, call.confidence) {
		return false
	}
	if w.RateLimit != nil && !refLimitHolds(w.RateLimit, true, call, now, u) {
		return false
	}
	if w.TokenBudget != nil && !refLimitHolds(w.TokenBudget, false, call, now, u) {
		return false
	}
	return true
}

var refDayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

func refClock(hhmm string) int {
	h, _ := strconv.Atoi(hhmm[:2])
	m, _ := strconv.Atoi(hhmm[3:])
	return h*3600 + m*60
}

func refInSchedule(w Window, now time.Time) bool {
	loc := time.UTC
	if w.TimeZone != "" {
		var err error
		if loc, err = time.LoadLocation(w.TimeZone); err != nil {
			panic("reference: evaluating an unknown zone")
		}
	}
	local := now.In(loc)
	onDay := func(d time.Weekday) bool { return len(w.Days) == 0 || slices.Contains(w.Days, refDayNames[d]) }
	s := local.Hour()*3600 + local.Minute()*60 + local.Second()
	from, to := refClock(w.From), refClock(w.To)
	if from < to {
		return onDay(local.Weekday()) && from <= s && s < to
	}
	yesterday := time.Weekday((int(local.Weekday()) + 6) % 7)
	return (onDay(local.Weekday()) && s >= from) || (onDay(yesterday) && s < to)
}

// refView is the request conditions read: during a resource's evaluation its
// resource field is that resource.
func refView(call *refRequest, sc refScope) map[string]any {
	if sc.mode != "resource" {
		return call.req
	}
	view := make(map[string]any, len(call.req)+1)
	for k, v := range call.req {
		view[k] = v
	}
	view["resource"] = sc.resource.raw
	return view
}

func refConditions(r Rule, call *refRequest, sc refScope) bool {
	req := refView(call, sc)
	for _, c := range r.Conditions {
		if !refGroupHoldsTruncated(c, req, call.result && call.truncated) {
			return false
		}
	}
	return true
}

// refGroupHoldsTruncated is refGroupHolds where, when truncated, every
// test of output.text or output.structured(.*) holds.
func refGroupHoldsTruncated(c Condition, req map[string]any, truncated bool) bool {
	switch {
	case c.Any != nil:
		return slices.ContainsFunc(c.Any, func(m Condition) bool { return refGroupHoldsTruncated(m, req, truncated) })
	case c.All != nil:
		return !slices.ContainsFunc(c.All, func(m Condition) bool { return !refGroupHoldsTruncated(m, req, truncated) })
	}
	if truncated && refReadsWholeOutput(c.Field) {
		return true
	}
	return refHolds(c, req)
}

func refGroupHolds(c Condition, req map[string]any) bool {
	switch {
	case c.Any != nil:
		for _, m := range c.Any {
			if refGroupHolds(m, req) {
				return true
			}
		}
		return false
	case c.All != nil:
		for _, m := range c.All {
			if !refGroupHolds(m, req) {
				return false
			}
		}
		return true
	}
	return refHolds(c, req)
}

// Issue 27: ask ranks below deny and above warn.
// Issue 28: redact ranks below ask and above warn.
var refRank = map[Effect]int{EffectAllow: 1, EffectAudit: 2, EffectWarn: 3, "redact": 4, "ask": 5, EffectDeny: 6}

func refRuleResult(p Policy, version int64, r Rule, res ResourceRef) refResult {
	out := refResult{refOutcome: refOutcome{Decision: Allow, PolicyID: p.ID, Version: version, RuleID: r.ID},
		Effect: Effect(r.Effect), Resource: res, Reason: r.Description}
	switch r.Effect {
	case "deny":
		out.Decision = Deny
	case "ask":
		out.Decision, out.Code, out.Timeout = "ask", "APPROVAL_REQUIRED", 5*time.Minute
		if r.Approval != nil && r.Approval.Timeout != "" {
			out.Timeout, _ = time.ParseDuration(r.Approval.Timeout)
		}
	}
	if out.Reason == "" {
		switch r.Effect {
		case "ask":
			out.Reason = fmt.Sprintf("approval required by rule %q of policy %q", r.ID, p.ID)
		case "deny":
			out.Reason = fmt.Sprintf("denied by rule %q of policy %q", r.ID, p.ID)
		case "warn":
			out.Reason = fmt.Sprintf("warned by rule %q of policy %q", r.ID, p.ID)
		case "audit":
			out.Reason = fmt.Sprintf("audited by rule %q of policy %q", r.ID, p.ID)
		case "redact":
			out.Reason = fmt.Sprintf("redacted by rule %q of policy %q", r.ID, p.ID)
		}
	}
	return out
}

// refTopTier: the highest priority decides; deny > warn > audit > allow;
// the first rule in spec order with that effect.
func refTopTier(p Policy, version int64, cands []Rule, res ResourceRef) *refResult {
	if len(cands) == 0 {
		return nil
	}
	top := cands[0].Priority
	for _, r := range cands {
		top = max(top, r.Priority)
	}
	var best *Rule
	for i := range cands {
		r := &cands[i]
		if r.Priority == top && (best == nil || refRank[Effect(r.Effect)] > refRank[Effect(best.Effect)]) {
			best = r
		}
	}
	out := refRuleResult(p, version, *best, res)
	return &out
}

func refHasResourceTargets(r Rule) bool { return r.Targets != nil && len(r.Targets.Resources) > 0 }

// refTiered is a tiered policy's verdict (nil: no match) and the warnings
// its evaluations reached.
func refTiered(p Policy, version int64, call *refRequest, now time.Time, u *refUsage, exempt func(Rule) bool) (*refResult, []string, []TraceVerdict) {
	var verdicts []*refResult
	var traced []TraceVerdict
	trace := func(res *ResourceRef, outcome string, v *refResult) {
		tv := TraceVerdict{PolicyID: p.ID, Resource: res, Outcome: outcome}
		if v != nil && outcome == OutcomeMatch {
			tv.RuleID, tv.Effect = v.RuleID, v.Effect
			for _, r := range p.Rules {
				if r.ID == v.RuleID {
					tier := r.Priority
					tv.Tier = &tier
				}
			}
		}
		traced = append(traced, tv)
	}
	var cands []Rule
	for _, r := range p.Rules {
		if !refHasResourceTargets(r) && refFilter(r, call, refScope{mode: "tool"}, now, u) == "" && !exempt(r) {
			cands = append(cands, r)
		}
	}
	verdicts = append(verdicts, refTopTier(p, version, cands, ResourceRef{}))
	if verdicts[0] == nil {
		trace(nil, OutcomeNoMatch, nil)
	} else {
		trace(nil, OutcomeMatch, verdicts[0])
	}
	for i := range call.resources {
		res := &call.resources[i]
		sc := refScope{mode: "resource", resource: res}
		bound := false
		cands = nil
		for _, r := range p.Rules {
			if !refHasResourceTargets(r) || !refTargets(r, call, sc) || refIsResult(r) != call.result {
				continue
			}
			bound = true
			if refFilter(r, call, sc, now, u) == "" && !exempt(r) {
				cands = append(cands, r)
			}
		}
		ref := res.ref
		switch {
		case !bound || (len(cands) == 0 && call.result):
			// A result evaluation has no implicit deny.
			verdicts = append(verdicts, nil)
			// A policy binding no resource at all has no per-resource
			// evaluations to explain; the contract leaves the trace of
			// such a policy's resources open.
			if slices.ContainsFunc(p.Rules, func(r Rule) bool { return refHasResourceTargets(r) && refIsResult(r) == call.result }) {
				trace(&ref, OutcomeNoOpinion, nil)
			}
		case len(cands) == 0:
			trace(&ref, OutcomeImplicitDeny, nil)
			verdicts = append(verdicts, &refResult{
				refOutcome: refOutcome{Decision: Deny, Code: CodeImplicitDeny, PolicyID: p.ID, Version: version},
				Effect:     EffectDeny, Resource: res.ref,
				Reason: fmt.Sprintf("no rule bound to resource %s/%s matched in policy %q", res.ref.Type, res.ref.Name, p.ID)})
		default:
			verdicts = append(verdicts, refTopTier(p, version, cands, res.ref))
			trace(&ref, OutcomeMatch, verdicts[len(verdicts)-1])
		}
	}
	var warnings []string
	var best *refResult
	for _, v := range verdicts {
		if v == nil {
			continue
		}
		if v.Effect == EffectWarn {
			warnings = append(warnings, v.Reason)
		}
		if best == nil || refRank[v.Effect] > refRank[best.Effect] {
			best = v
		}
	}
	return best, warnings, traced
}

// refGateway evaluates under issue 9's model: the namespace scan of seed
// 000, in which a tiered policy takes part as one verdict.
func refGateway(b Bundle, req map[string]any, now time.Time, u *refUsage) refResult {
	return refGatewayPhase(b, req, now, u, false, false)
}

// refGatewayPhase is refGateway for a call (result false) or a result
// evaluation, of an output held whole or truncated.
func refGatewayPhase(b Bundle, req map[string]any, now time.Time, u *refUsage, result, truncated bool) refResult {
	deny := func(code Code) refResult {
		return refResult{refOutcome: refOutcome{Decision: Deny, Code: code}, Effect: EffectDeny}
	}
	if agent, ok := req["agent_id"].(string); ok {
		for _, f := range b.FrozenAgents {
			if strings.EqualFold(f.ID, agent) && (f.ExpiresAt == nil || now.Before(*f.ExpiresAt)) {
				return deny(CodeAgentFrozen)
			}
		}
	}
	var enforcing, shadows, cluster, ns []Policy
	for _, p := range b.Policies {
		switch {
		case p.Mode == ModeAudit:
			shadows = append(shadows, p)
		case p.Kind == KindClusterPolicy:
			cluster = append(cluster, p)
		default:
			ns = append(ns, p)
		}
	}
	enforcing = append(slices.Clone(cluster), ns...)
	withShadow := func(out refResult) refResult {
		// In evaluation order: the cluster level first.
		refSort(shadows)
		sort.SliceStable(shadows, func(i, j int) bool {
			return shadows[i].Kind == KindClusterPolicy && shadows[j].Kind != KindClusterPolicy
		})
		for _, p := range shadows {
			p.Mode = ""
			alone := Bundle{Policies: []Policy{p}, Exceptions: b.Exceptions}
			r := refGatewayPhase(alone, req, now, u, result, truncated)
			kind := ""
			if p.Kind == KindClusterPolicy {
				kind = KindClusterPolicy
			}
			out.Shadow = append(out.Shadow, ShadowVerdict{Kind: kind, Policy: p.ID, Decision: r.Decision, Rule: r.RuleID})
		}
		return out
	}
	if len(enforcing) == 0 {
		return withShadow(deny(CodeNoPolicies))
	}
	call := refRead(req)
	call.result, call.truncated = result, truncated
	if result && !slices.ContainsFunc(enforcing, func(p Policy) bool { return slices.ContainsFunc(p.Rules, refIsResult) }) {
		return withShadow(refResult{refOutcome: refOutcome{Decision: Allow}, Effect: EffectAllow})
	}
	exempt := refExempt(b.Exceptions, req, now)
	out := refLevels(cluster, ns, call, now, u, exempt)
	if len(b.Exceptions) > 0 {
		without := refLevels(cluster, ns, call, now, u, func(string, string, string) bool { return false })
		if without.Decision != out.Decision || without.Effect != out.Effect || without.Kind != out.Kind || without.PolicyID != out.PolicyID || without.RuleID != out.RuleID {
			out.ExceptionApplied = refResponsible(b.Exceptions, req, now, out, without)
		}
	}
	return withShadow(out)
}

// refSort is evaluation order: priority descending, then name ascending.
func refSort(policies []Policy) {
	sort.SliceStable(policies, func(i, j int) bool {
		if policies[i].Priority != policies[j].Priority {
			return policies[i].Priority > policies[j].Priority
		}
		return policies[i].ID < policies[j].ID
	})
}

// refExempt tells, for this call at now, whether a PolicyException exempts
// it from rule of policy (kind "" or ClusterPolicy).
func refExempt(exceptions []Exception, req map[string]any, now time.Time) func(kind, policy, rule string) bool {
	return func(kind, policy, rule string) bool {
		for _, x := range exceptions {
			if refExceptionApplies(x, req, now) && x.PolicyKind == kind && x.Policy == policy && slices.Contains(x.RuleIDs, rule) {
				return true
			}
		}
		return false
	}
}

func refExceptionApplies(x Exception, req map[string]any, now time.Time) bool {
	agent, ok := req["agent_id"].(string)
	return ok && now.Before(x.ExpiresAt) && slices.ContainsFunc(x.AgentIDs, func(a string) bool { return strings.EqualFold(a, agent) })
}

// refResponsible: the first exception by name in force for the call that
// exempts from the rule that decided without exceptions; else from any
// rule of the policy that decided; else any in force.
func refResponsible(exceptions []Exception, req map[string]any, now time.Time, out, without refResult) string {
	sorted := slices.Clone(exceptions)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, want := range []func(Exception) bool{
		func(x Exception) bool {
			return without.RuleID != "" && x.Policy == without.PolicyID && refSameKind(x.PolicyKind, without.Kind) && slices.Contains(x.RuleIDs, without.RuleID)
		},
		func(x Exception) bool {
			return out.PolicyID != "" && x.Policy == out.PolicyID && refSameKind(x.PolicyKind, out.Kind)
		},
		func(Exception) bool { return true },
	} {
		for _, x := range sorted {
			if refExceptionApplies(x, req, now) && want(x) {
				return x.Name
			}
		}
	}
	return ""
}

// refSameKind: "" and Policy both name a namespace's Policy.
func refSameKind(a, b string) bool { return (a == KindClusterPolicy) == (b == KindClusterPolicy) }

// refLevel is one level's scan, as every bundle was scanned before
// ClusterPolicies: the first deny decides (final: nothing after it is
// read), otherwise the last allow, warn or audit (verdict), otherwise the
// first policy's default (deny or not).
type refLevel struct {
	final    *refResult
	verdict  *refResult
	def      string // the first policy's default effect
	first    string
	warnings []string
	traced   [][]TraceVerdict
}

func refScanLevel(policies []Policy, call *refRequest, now time.Time, u *refUsage, kind string, exempt func(kind, policy, rule string) bool) refLevel {
	policies = slices.Clone(policies)
	refSort(policies)
	var l refLevel
	l.first = policies[0].ID
	stamp := func(r refResult) *refResult {
		r.Kind = kind
		return &r
	}
	for _, p := range policies {
		if len(refPolicyProblems(p)) > 0 {
			out := refResult{refOutcome: refOutcome{Decision: Deny, Code: CodePolicyCompileError, PolicyID: p.ID}, Effect: EffectDeny}
			l.final = stamp(out)
			return l
		}
		version := p.Version
		if version == 0 {
			version = 1
		}
		ex := func(r Rule) bool { return exempt(kind, p.ID, r.ID) }
		if p.Kind != KindClusterPolicy {
			ex = func(r Rule) bool { return exempt("", p.ID, r.ID) }
		}
		if p.Evaluation == "tiered" {
			v, w, tv := refTiered(p, version, call, now, u, ex)
			l.warnings = append(l.warnings, w...)
			l.traced = append(l.traced, tv)
			if v == nil {
				continue
			}
			if v.Decision == Deny {
				l.final = stamp(*v)
				return l
			}
			if l.verdict == nil || !refSticky(l.verdict.Effect) {
				l.verdict = stamp(*v)
			}
			continue
		}
		for _, r := range p.Rules {
			if refFilter(r, call, refScope{mode: "ordered"}, now, u) != "" || ex(r) {
				continue
			}
			out := refRuleResult(p, version, r, ResourceRef{})
			if r.Effect == "warn" {
				l.warnings = append(l.warnings, out.Reason)
			}
			if out.Decision == Deny {
				l.final = stamp(out)
				return l
			}
			// Issue 27: in ordered evaluation a matching ask decides
			// unless a deny does; the first ask reached is the one.
			if l.verdict == nil || !refSticky(l.verdict.Effect) {
				l.verdict = stamp(out)
			}
		}
	}
	first := policies[0]
	l.def = first.DefaultEffect
	if l.def == "" {
		l.def = "allow"
		if first.Evaluation == "tiered" {
			l.def = "deny"
		}
	}
	if call.result {
		l.def = "allow" // a result no result rule judged goes on
	}
	return l
}

// refLevels decides a bundle of one or two levels: the most restrictive of
// the cluster's and the namespace's, deny > warn > audit > allow, a tie to
// the namespace; within a level as a one-level bundle always was. A level
// is named (Kind) only when the bundle has ClusterPolicies.
func refLevels(cluster, ns []Policy, call *refRequest, now time.Time, u *refUsage, exempt func(kind, policy, rule string) bool) refResult {
	var warnings []string
	var traced [][]TraceVerdict
	finish := func(r refResult) refResult {
		r.Warnings, r.Verdicts = warnings, traced
		return r
	}
	named := func(kind string) string {
		if len(cluster) == 0 {
			return ""
		}
		return kind
	}
	var levels []refLevel
	var kinds []string
	for _, lv := range []struct {
		policies []Policy
		kind     string
	}{{cluster, KindClusterPolicy}, {ns, KindPolicy}} {
		if len(lv.policies) == 0 {
			continue
		}
		l := refScanLevel(lv.policies, call, now, u, named(lv.kind), exempt)
		warnings = append(warnings, l.warnings...)
		traced = append(traced, l.traced...)
		if l.final != nil {
			return finish(*l.final)
		}
		if l.verdict == nil && l.def == "deny" {
			return finish(refResult{refOutcome: refOutcome{Decision: Deny}, Effect: EffectDeny, Kind: named(lv.kind),
				Reason: fmt.Sprintf("no rule matched and policy %q denies by default", l.first)})
		}
		levels = append(levels, l)
		kinds = append(kinds, named(lv.kind))
	}
	var best *refResult
	for _, l := range levels {
		if l.verdict != nil && (best == nil || refRank[l.verdict.Effect] >= refRank[best.Effect]) {
			best = l.verdict
		}
	}
	if best != nil {
		return finish(*best)
	}
	return finish(refResult{refOutcome: refOutcome{Decision: Allow}, Effect: EffectAllow, Kind: kinds[len(kinds)-1]})
}

var (
	refClockRE = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
	refDays    = map[string]bool{"mon": true, "tue": true, "wed": true, "thu": true, "fri": true, "sat": true, "sun": true}
)

// refRuleFilterProblems lists what the contract makes a compile error in a
// rule's subjects, targets, select and when.
func refRuleFilterProblems(r Rule) []string {
	var out []string
	bad := func(why string) { out = append(out, why) }
	empty := func(l []string) bool { return l != nil && len(l) == 0 }
	if s := r.Subjects; s != nil {
		if empty(s.Agents) || empty(s.Roles) {
			bad("empty subjects list")
		}
	}
	if t := r.Targets; t != nil {
		if empty(t.Servers) || empty(t.Tools) || (t.Resources != nil && len(t.Resources) == 0) {
			bad("empty targets list")
		}
		for _, rt := range t.Resources {
			if len(rt.Names) == 0 {
				bad("resource target without names")
			}
		}
	}
	if s := r.Select; s != nil {
		if empty(s.Action) || empty(s.SideEffect) {
			bad("empty select list")
		}
		if len(s.Tool) >= 2 && strings.HasPrefix(s.Tool, "/") && strings.HasSuffix(s.Tool, "/") {
			if _, err := re2.Compile(s.Tool[1 : len(s.Tool)-1]); err != nil {
				bad("select.tool pattern")
			}
		}
		for k, v := range s.Context {
			if k == "" || strings.Contains(k, ".") || k == "__proto__" || k == "constructor" || k == "prototype" {
				bad("select.context key")
			}
			var x any
			if json.Unmarshal(v, &x) != nil {
				bad("select.context value")
			}
			switch x.(type) {
			case string, float64, bool:
			default:
				bad("select.context value")
			}
		}
	}
	if w := r.When; w != nil {
		if (w.Schedule != nil && len(w.Schedule) == 0) || empty(w.Environments) || empty(w.Sensitivity) || empty(w.ActorConfidence) {
			bad("empty when list")
		}
		for _, win := range w.Schedule {
			if empty(win.Days) {
				bad("empty days")
			}
			for _, d := range win.Days {
				if !refDays[d] {
					bad("day")
				}
			}
			if !refClockRE.MatchString(win.From) || !refClockRE.MatchString(win.To) {
				bad("HH:MM")
			} else if win.From == win.To {
				bad("empty window")
			}
			if win.TimeZone != "" {
				if _, err := time.LoadLocation(win.TimeZone); err != nil {
					bad("time zone")
				}
			}
		}
		for _, l := range []*Limit{w.RateLimit, w.TokenBudget} {
			if l == nil {
				continue
			}
			if l.Max < 1 {
				bad("max")
			}
			if _, ok := refWindow(l.Window); !ok {
				bad("window")
			}
			if l.Per != "" && l.Per != "agent" && l.Per != "session" && l.Per != "namespace" {
				bad("per")
			}
			if l.Store != "" && l.Store != "local" && l.Store != "shared" {
				bad("store")
			}
			if l.FailOpen && l.Store != "shared" {
				bad("failOpen")
			}
		}
	}
	return out
}

// refGroupProblems checks a condition at depth 0 (a rule's), 1 (in any) or
// 2 (in all): any holds leaves and all groups, all holds leaves only.
func refGroupProblems(c Condition, depth int) []string {
	switch {
	case c.Any != nil && c.All != nil:
		return []string{"any and all"}
	case c.Any != nil:
		if depth > 0 || len(c.Any) == 0 || c.Field != "" || c.Operator != "" || c.CastToNumber {
			return []string{"any"}
		}
		var out []string
		for _, m := range c.Any {
			out = append(out, refGroupProblems(m, 1)...)
		}
		return out
	case c.All != nil:
		if depth > 1 || len(c.All) == 0 || c.Field != "" || c.Operator != "" || c.CastToNumber {
			return []string{"all"}
		}
		var out []string
		for _, m := range c.All {
			out = append(out, refGroupProblems(m, 2)...)
		}
		return out
	}
	return refConditionProblems(c)
}
