package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/engine/internal/fold"
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// EvalOptions tune one evaluation. The zero value is the default: real clock,
// 50 ms budget, no trace.
type EvalOptions struct {
	// Now is the clock: frozen-agent expiry and the budget read it.
	Now func() time.Time
	// Budget bounds wall-clock time; past it the decision is deny
	// EVAL_TIMEOUT. Zero means DefaultBudget.
	Budget time.Duration
	// Explain records a trace of every rule reached.
	Explain bool
	// MaxTrace bounds the trace: each rule in it and each of its
	// conditions counts one entry (a condition carries up to MaxTraceValue
	// bytes of resolved value). A rule that would take the trace past it is
	// left out, with every rule after it, and TraceTruncated is set; the
	// decision is the same. Zero or less means no bound.
	MaxTrace int
	// ServiceAccount is the ServiceAccount the caller runs as, vouched for
	// by the caller (the sidecar's --service-account), never read from the
	// request: a freeze naming it denies whatever agent_id says.
	ServiceAccount string
	// Usage answers rateLimit and tokenBudget conditions; nil counts
	// nothing as used.
	Usage Usage
	// Shared answers the limits whose store is shared (SharedUsage); nil
	// reads them through Usage like local ones.
	Shared SharedUsage
	// Phase is which rules run: call rules ("" or PhaseCall) or result
	// rules (PhaseResult, on a request that carries FieldOutput).
	Phase Phase
	// OutputTruncated says the caller could not hold the whole output
	// (the MCP proxy's --max-result-bytes): every condition on output.text
	// or output.structured then holds, without spans, so result rules
	// that need the whole text decide as if they matched.
	OutputTruncated bool
}

// budgetCheckEvery is how many rules pass between clock reads: reading the
// clock per rule would cost more than most rules.
const budgetCheckEvery = 32

// UsesUsage tells whether a rule reads EvalOptions.Usage (a rateLimit or a
// tokenBudget): a caller that counts calls must then decide and count each
// call as one step, or calls decided at once would pass a limit together.
func (c *Compiled) UsesUsage() bool { return c != nil && c.usesUsage }

// UsesSharedUsage tells whether a limit has store: shared: the decision
// core must then reserve the call in the shared store and answer through
// EvalOptions.Shared.
func (c *Compiled) UsesSharedUsage() bool { return c != nil && c.usesShared }

// UsesNamespaceUsage tells whether a limit has per: namespace: a ledger
// must then also count each call under UsageKey{Namespace: true}.
func (c *Compiled) UsesNamespaceUsage() bool { return c != nil && c.usesNamespace }

// UsageWindow is the longest window of c's rateLimits and tokenBudgets (0
// without any): calls older than it are read by no limit of c, so a
// counter holding only those may be forgotten.
func (c *Compiled) UsageWindow() time.Duration {
	if c == nil {
		return 0
	}
	return c.usageWindow
}

// Revision is the revision of the bundle this was compiled from.
func (c *Compiled) Revision() string {
	if c == nil {
		return ""
	}
	return c.revision
}

// Evaluate decides one request. It never panics on any request and always
// returns allow or deny; every deny that no rule made carries a Code.
func (c *Compiled) Evaluate(req Request, opts EvalOptions) Result {
	clk := clock{now: opts.Now}
	if clk.now == nil {
		clk.start = time.Now()
	} else {
		clk.start = clk.now()
	}
	tr := tracer{on: opts.Explain, left: opts.MaxTrace}
	if tr.left <= 0 {
		tr.left = math.MaxInt
	}
	var res Result
	c.evaluate(req, &opts, &clk, &tr, &res)
	if res.Effect == "" {
		res.Effect = res.StatedEffect()
	}
	res.Trace, res.Verdicts, res.TraceTruncated = tr.rules, tr.verdicts, tr.truncated
	res.LatencyMs = float64(clk.elapsed().Nanoseconds()) / 1e6
	return res
}

// tracer collects the trace of one evaluation, within its bound.
type tracer struct {
	on        bool
	left      int // entries the trace may still take
	rules     []TraceRule
	verdicts  []TraceVerdict
	truncated bool
}

// fits takes room for a rule of n conditions, or reports that there is none
// left (and that the trace is truncated from here on).
func (t *tracer) fits(n int) bool {
	if t.truncated || 1+n > t.left {
		t.truncated = true
		return false
	}
	t.left -= 1 + n
	return true
}

// clock reads the wall clock once, at the start; elapsed time then comes
// from the monotonic clock alone (time.Since), which costs a third as much.
type clock struct {
	now   func() time.Time // injected; nil: the real clock
	start time.Time
}

func (k *clock) elapsed() time.Duration {
	if k.now == nil {
		return time.Since(k.start)
	}
	return k.now().Sub(k.start)
}

// evaluate decides into out (zero on entry); the trace, when asked for,
// goes to tr, and Evaluate puts it in the result. Results are written in
// place, never returned by value: a Result is some 250 bytes, and copies
// and zeroed temporaries of it cost the fast paths more than deciding.
func (c *Compiled) evaluate(req Request, opts *EvalOptions, clk *clock, tr *tracer, out *Result) {
	if c == nil {
		out.Decision, out.Code, out.Reason = Deny, CodeNoPolicies, "no policy bundle is loaded"
		return
	}
	if e := c.frozenFor(req, opts.ServiceAccount, clk.start); e != nil {
		out.Decision, out.Code, out.Reason = Deny, CodeAgentFrozen, e.Reason
		return
	}
	if len(c.policies) == 0 {
		out.Decision, out.Code, out.Reason = Deny, CodeNoPolicies, "the bundle has no policies"
		c.shadow(req, opts, out)
		return
	}
	if opts.Phase != "" && opts.Phase != PhaseCall {
		c.evaluateResult(req, opts, clk, tr, out)
		return
	}
	if c.scan(req, opts, clk, tr, out, false) != "" {
		c.exceptionChanged(req, opts, clk, out)
	}
	c.shadow(req, opts, out)
}

// exceptionChanged names an exception on out when the decision without
// exceptions differs in decision, effect or deciding policy (kind and
// name) or rule: a deny by another rule is a change, since the answer's
// code names the rule. It
// runs only when an exception exempted the call from a rule that held.
func (c *Compiled) exceptionChanged(req Request, opts *EvalOptions, clk *clock, out *Result) {
	var without Result
	quiet := tracer{left: math.MaxInt}
	c.scan(req, opts, clk, &quiet, &without, true)
	if without.Decision != out.Decision || without.StatedEffect() != out.StatedEffect() ||
		without.MatchedPolicyKind != out.MatchedPolicyKind || without.MatchedPolicyID != out.MatchedPolicyID || without.MatchedRuleID != out.MatchedRuleID {
		out.ExceptionApplied = c.responsible(req, opts.ServiceAccount, clk.start, out, &without)
	}
}

// scan is the scan of the policies: the first deny decides, otherwise the
// last allow (warn, audit), otherwise the first policy's default; a bundle
// with ClusterPolicies is scanned so per level (decideLevels). It returns
// the first exception that exempted the call from a rule that held
// (none when noExceptions).
func (c *Compiled) scan(req Request, opts *EvalOptions, clk *clock, tr *tracer, out *Result, noExceptions bool) string {
	budget := opts.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	s := c.scratch.Get().(*scratch)
	defer c.scratch.Put(s)
	s.reset(req, clk.start, opts.Usage, opts.Shared)
	s.outputTruncated = opts.OutputTruncated

	e := run{c: c, s: s, clk: clk, tr: tr, budget: budget, serviceAccount: opts.ServiceAccount, noExceptions: noExceptions}
	e.tool, e.toolOK = req[FieldToolName].(string)
	policies, byTool := c.policies, c.byTool
	if opts.Phase == PhaseResult {
		policies, byTool, e.result = c.results, c.resultByTool, true
	}
	var hits []toolHit
	if e.toolOK {
		hits = byTool[e.tool]
	}
	var kept verdict
	var cluster level
	for pi := range policies {
		if pi == c.nsStart && pi > 0 {
			cluster = level{v: kept, first: &policies[0]}
			if cluster.defaultDeny() {
				e.decideLevels(&cluster, &level{}, out)
				return e.exempted
			}
			kept = verdict{}
		}
		p := &policies[pi]
		e.pinned = nil
		if len(hits) > 0 && hits[0].policy == int32(pi) {
			e.pinned, hits = hits[0].rules, hits[1:]
		}
		if e.toolOK && e.pinned == nil && p.skippable {
			continue
		}
		if p.compileError != "" {
			e.compileError(p, out)
			return e.exempted
		}
		var v verdict
		var ok bool
		if p.tiered {
			v, ok = e.tiered(p)
		} else {
			v, ok = e.ordered(p)
		}
		switch {
		case !ok:
			e.timeout(out)
			return e.exempted
		case !v.set():
			continue
		case v.effect() == EffectDeny:
			v.fill(out, s)
			return e.exempted
		case kept.sticks():
			continue // an earlier policy's ask or redact decides unless a deny does
		}
		kept = v
	}
	if c.nsStart > 0 && c.nsStart < len(policies) {
		e.decideLevels(&cluster, &level{v: kept, first: &policies[c.nsStart]}, out)
		return e.exempted
	}
	if kept.set() {
		kept.fill(out, s)
		return e.exempted
	}
	first := &policies[0]
	out.Decision, out.Warnings, out.MatchedPolicyKind = Allow, s.warningList(), first.kind
	if first.defaultDeny {
		out.Decision, out.Reason = Deny, first.defaultReason
	}
	return e.exempted
}

// compileError is the deny of reaching a policy that does not compile.
// It and timeout are kept out of scan: their temporaries would enlarge the
// frame every evaluation sets up.
func (e *run) compileError(p *cpolicy, out *Result) {
	if e.tr.on && e.tr.fits(0) {
		e.tr.rules = append(e.tr.rules, TraceRule{PolicyID: p.id, RuleIndex: -1, CompileError: p.compileError})
	}
	out.Decision, out.Code, out.Reason = Deny, CodePolicyCompileError, p.compileError
	out.MatchedPolicyID, out.MatchedPolicyVersion, out.MatchedPolicyKind = p.id, p.version, p.kind
	out.Warnings = e.s.warningList()
}

// timeout is the deny of an evaluation past its budget.
func (e *run) timeout(out *Result) {
	out.Decision, out.Code = Deny, CodeEvalTimeout
	out.Reason = fmt.Sprintf("evaluation exceeded its %v budget after %d rules", e.budget, e.steps)
	out.Warnings = e.s.warningList()
}

// run is one evaluation's progress through the policies.
type run struct {
	c      *Compiled
	s      *scratch
	clk    *clock
	tr     *tracer
	budget time.Duration
	steps  int
	tool   string
	toolOK bool    // tool_name is a string
	pinned []int32 // the current policy's rules pinned to tool
	// serviceAccount is the caller's (EvalOptions), for exceptions.
	serviceAccount string
	noExceptions   bool   // decide as if no exception existed
	exempted       string // the first exception that exempted a rule that held
	result         bool   // a result evaluation: no implicit deny
}

// warn lists a warn verdict's reason. The list lives in the pooled scratch,
// not in run: the result would otherwise hold run's memory, and escape
// analysis would move the clock and tracer to the heap on every call.
func (e *run) warn(reason string) { e.s.warnings = append(e.s.warnings, reason) }

// warnings is the result's copy of the list, nil when it is empty.
func (s *scratch) warningList() []string {
	if len(s.warnings) == 0 {
		return nil
	}
	return slices.Clone(s.warnings)
}

// The scans below are written out rather than factored into helpers: they
// run once per rule, and a thousand-rule scan pays for every call the
// inliner cannot remove. Each counts the rules it reaches and checks the
// budget every budgetCheckEvery of them and after every rule that ran a
// regex; each traces a rule when asked (explain), and otherwise checks a
// plain rule's conditions inline and a gateway rule through failed.

// explain checks r in mode m and traces it.
func (e *run) explain(p *cpolicy, ri int32, r *crule, m mode) bool {
	matched, t := e.c.explainRule(e.s, p, int(ri), r, m)
	e.tr.rules = append(e.tr.rules, t)
	return matched
}

// ordered is seed 000's scan of one policy: the first matching deny
// decides at once; otherwise the last matching allow, warn or audit is the
// policy's verdict.
func (e *run) ordered(p *cpolicy) (verdict, bool) {
	c, s := e.c, e.s
	var kept verdict
	it := e.candidates(p)
	for ri, ok := it.next(); ok; ri, ok = it.next() {
		r := &p.rules[ri]
		e.steps++
		if e.steps%budgetCheckEvery == 0 && e.clk.elapsed() > e.budget {
			return verdict{}, false
		}
		var matched bool
		switch {
		case e.tr.on && e.tr.fits(len(r.conditions)):
			matched = e.explain(p, ri, r, modeOrdered)
		case r.filtered:
			matched = c.failed(s, r, modeOrdered) == filterNone
		default:
			matched = c.ruleMatches(s, r)
		}
		if r.usesRegex && e.clk.elapsed() > e.budget {
			return verdict{}, false
		}
		if !matched || (r.exceptions != nil && e.exemptTraced(r)) {
			continue
		}
		if r.effect == EffectWarn {
			e.warn(r.reason)
		}
		if r.deny {
			return verdict{policy: p, rule: r, res: -1}, true
		}
		// An ask or a redact decides unless a deny does: no later allow
		// replaces it.
		if !kept.sticks() {
			kept = verdict{policy: p, rule: r, res: -1}
		}
	}
	return kept, true
}

// tiered is seed 001's verdict of one policy: one evaluation at tool level
// and one per resource the call touches, each decided by its top tier, then
// combined: any deny wins, otherwise the strongest effect, ties to the
// earliest evaluation.
func (e *run) tiered(p *cpolicy) (verdict, bool) {
	s := e.s
	v := s.loadView()
	best, ok := e.tier(p, e.candidates(p), modeTool, -1)
	if !ok || p.byResource == nil {
		return best, ok
	}
	defer s.leaveResource()
	for i := range v.resources {
		bound := p.byResource[v.resources[i].typ][v.resources[i].name]
		if len(bound) == 0 {
			e.traceVerdict(p, i, verdict{}, OutcomeNoOpinion)
			continue
		}
		s.enterResource(i)
		rv, ok := e.tier(p, ruleIter{a: bound, all: -1}, modeResource, i)
		if !ok {
			return verdict{}, false
		}
		if rv.set() && rv.stronger(&best) {
			best = rv
		}
	}
	return best, true
}

// tier is one evaluation of a tiered policy: among the matching rules,
// those of the highest priority decide, deny > warn > audit > allow, the
// first in spec order with that effect; it sees the rules in that order
// (cpolicy.rank) and stops at the first match. For a resource (m is
// modeResource) rules bound to it of which none matches are its implicit
// deny.
func (e *run) tier(p *cpolicy, it ruleIter, m mode, res int) (verdict, bool) {
	top := verdict{res: int32(res)}
	bound := 0
	for ri, ok := it.next(); ok; ri, ok = it.next() {
		r := &p.rules[ri]
		e.steps++
		if e.steps%budgetCheckEvery == 0 && e.clk.elapsed() > e.budget {
			return verdict{}, false
		}
		if m == modeResource && e.s.targetsHold(r.targets, m) {
			bound++
		}
		var matched bool
		if e.tr.on && e.tr.fits(len(r.conditions)) {
			matched = e.explain(p, ri, r, m)
		} else {
			matched = e.c.failed(e.s, r, m) == filterNone
		}
		if r.usesRegex && e.clk.elapsed() > e.budget {
			return verdict{}, false
		}
		if !matched || (r.exceptions != nil && e.exemptTraced(r)) {
			continue
		}
		// Rules come in rank order, so the first match is the decider.
		top = verdict{policy: p, rule: r, res: int32(res)}
		break
	}
	outcome := OutcomeMatch
	switch {
	case !top.set() && bound > 0 && !e.result:
		top = verdict{policy: p, res: int32(res), implicit: true}
		outcome = OutcomeImplicitDeny
	case !top.set() && m == modeResource:
		outcome = OutcomeNoOpinion
	case !top.set():
		outcome = OutcomeNoMatch
	}
	if top.set() && top.effect() == EffectWarn {
		e.warn(top.reason(e.s))
	}
	e.traceVerdict(p, res, top, outcome)
	return top, true
}

func (e *run) traceVerdict(p *cpolicy, res int, v verdict, outcome string) {
	if !e.tr.on || !e.tr.fits(0) {
		return
	}
	t := TraceVerdict{PolicyID: p.id, Outcome: outcome}
	if v.set() {
		t.Effect = v.effect()
	}
	if res >= 0 {
		ref := e.s.view.resources[res].ref()
		t.Resource = &ref
	}
	if v.rule != nil {
		t.RuleID = v.rule.id
		tier := v.rule.priority
		t.Tier = &tier
	}
	e.tr.verdicts = append(e.tr.verdicts, t)
}

// frozenFor is the unexpired freeze that stops this call, if any: one
// naming the request's agent_id, or the caller's service account (which the
// caller vouches for; a request cannot name it), or every agent.
func (c *Compiled) frozenFor(req Request, serviceAccount string, now time.Time) *frozenEntry {
	if agent, ok := req[FieldAgentID].(string); ok {
		if e := c.frozenEntry(agent, now); e != nil {
			return e
		}
	}
	if serviceAccount != "" {
		if e := unexpired(c.frozen.byServiceAccount[serviceAccount], now); e != nil {
			return e
		}
	}
	return unexpired(c.frozen.all, now)
}

// frozenEntry finds an unexpired freeze for agent, comparing as
// strings.EqualFold does, without allocating for ordinary ids.
func (c *Compiled) frozenEntry(agent string, now time.Time) *frozenEntry {
	if len(c.frozen.byAgent) == 0 {
		return nil
	}
	var entries []frozenEntry
	if k, ok := fold.ASCIIKey(agent); ok {
		entries = c.frozen.byAgent[k]
	} else {
		var buf [128]byte
		entries = c.frozen.byAgent[string(fold.AppendKey(buf[:0], agent))]
	}
	return unexpired(entries, now)
}

// unexpired is the first of entries that has not expired at now.
func unexpired(entries []frozenEntry, now time.Time) *frozenEntry {
	for i := range entries {
		if e := &entries[i]; !e.Expired(now) {
			return e
		}
	}
	return nil
}

// ruleIter yields a policy's candidate rules in evaluation order (spec
// order, or a tiered policy's rank order): the rules indexed under the
// request's tool merged with the rules that accept any tool.
type ruleIter struct {
	a, b []int32
	rank []int32 // a tiered policy's order; nil: by index
	i, j int
	all  int32 // when >= 0, yield 0..n-1 instead of merging
	n    int32
}

func (e *run) candidates(p *cpolicy) ruleIter {
	switch {
	case p.tiered && !e.toolOK:
		return ruleIter{a: p.toolLevel, all: -1}
	case !e.toolOK && p.inPhase != nil:
		return ruleIter{a: p.inPhase, all: -1}
	case !e.toolOK:
		return ruleIter{all: 0, n: int32(len(p.rules))}
	}
	return ruleIter{a: e.pinned, b: p.anyTool, rank: p.rank, all: -1}
}

func (it *ruleIter) next() (int32, bool) {
	if it.all >= 0 {
		if it.all >= it.n {
			return 0, false
		}
		it.all++
		return it.all - 1, true
	}
	switch {
	case it.i < len(it.a) && (it.j >= len(it.b) || it.before(it.a[it.i], it.b[it.j])):
		it.i++
		return it.a[it.i-1], true
	case it.j < len(it.b):
		it.j++
		return it.b[it.j-1], true
	}
	return 0, false
}

func (it *ruleIter) before(x, y int32) bool {
	if it.rank == nil {
		return x < y
	}
	return it.rank[x] < it.rank[y]
}

// ruleMatches checks a rule without gateway filters: its conditions.
func (c *Compiled) ruleMatches(s *scratch, r *crule) bool {
	for i := range r.conditions {
		if !c.holds(s, &r.conditions[i]) {
			return false
		}
	}
	return true
}

func (c *Compiled) explainRule(s *scratch, p *cpolicy, index int, r *crule, m mode) (bool, TraceRule) {
	t := TraceRule{PolicyID: p.id, RuleIndex: index, RuleID: r.id, Effect: r.source.Effect, Priority: r.priority, Matched: true}
	if m == modeResource {
		ref := s.view.resources[s.cur].ref()
		t.Resource = &ref
	}
	if r.filtered {
		if f := s.gatewayFailed(r, m); f != filterNone {
			t.Matched, t.Failed = false, f.String()
			return false, t
		}
	}
	for i := range r.conditions {
		tc := c.traceCondition(s, &r.conditions[i], &r.source.Conditions[i], i)
		t.Conditions = append(t.Conditions, tc)
		t.Matched = t.Matched && tc.Held
	}
	// A plain rule of an ordered policy can only fail its conditions; its
	// trace stays exactly what it was before the gateway model.
	if !t.Matched && (r.filtered || p.tiered) {
		t.Failed = filterConditions.String()
	}
	return t.Matched, t
}

// traceCondition explains one test or group: what the field resolved to
// and whether it held; a group lists its members.
func (c *Compiled) traceCondition(s *scratch, cc *ccond, src *Condition, index int) TraceCondition {
	held := c.holds(s, cc)
	if cc.op == opOutput {
		tc := c.traceCondition(s, &cc.sub[0], src, index)
		tc.Held = held
		return tc
	}
	if cc.op == opAny || cc.op == opAll {
		members := src.Any
		tc := TraceCondition{Index: index, Group: "any", Held: held}
		if cc.op == opAll {
			members, tc.Group = src.All, "all"
		}
		for i := range cc.sub {
			tc.Members = append(tc.Members, c.traceCondition(s, &cc.sub[i], &members[i], i))
		}
		return tc
	}
	v, present := s.value(c, cc.slot)
	tc := TraceCondition{Index: index, Field: src.Field, Operator: src.Operator,
		Value: src.Value, Values: src.Values, Present: present, Held: held}
	if present {
		tc.Resolved = jsonvalue.Truncate(Stringify(v), MaxTraceValue)
	}
	if cc.cast {
		tc.CastToNumber, tc.Reason = true, jsonvalue.CastReason(v, present)
	}
	return tc
}

// holds evaluates one condition.
func (c *Compiled) holds(s *scratch, cc *ccond) bool {
	if cc.op >= opAny {
		return c.groupHolds(s, cc)
	}
	v, present := s.value(c, cc.slot)
	if cc.cast {
		return castHolds(cc, v, present)
	}
	switch cc.op {
	case opExists:
		return present
	case opNotExists:
		return !present
	case opIsEmpty:
		return jsonvalue.IsEmpty(v, present)
	case opIsNotEmpty:
		return !jsonvalue.IsEmpty(v, present)
	}
	if !present {
		switch cc.op {
		case opNeq, opNotIn, opNotContains:
			return true
		}
		return false
	}
	switch cc.op {
	case opEq:
		return cc.value.Equal(v)
	case opNeq:
		return !cc.value.Equal(v)
	case opIn:
		return cc.members.Has(s.str(c, cc.slot, v))
	case opNotIn:
		return !cc.members.Has(s.str(c, cc.slot, v))
	case opContains:
		return strings.Contains(s.str(c, cc.slot, v), cc.value.Str)
	case opNotContains:
		return !strings.Contains(s.str(c, cc.slot, v), cc.value.Str)
	case opStartsWith:
		return strings.HasPrefix(s.str(c, cc.slot, v), cc.value.Str)
	case opEndsWith:
		return strings.HasSuffix(s.str(c, cc.slot, v), cc.value.Str)
	case opMatches:
		return cc.matcher.Match(s.str(c, cc.slot, v))
	case opGt, opGte, opLt, opLte:
		f, ok := jsonvalue.NumberOf(v)
		if !ok {
			return false
		}
		switch cc.op {
		case opGt:
			return f > cc.value.Num
		case opGte:
			return f >= cc.value.Num
		case opLt:
			return f < cc.value.Num
		}
		return f <= cc.value.Num
	case opIsValidJSON:
		str, ok := v.(string)
		return ok && json.Valid([]byte(str))
	case opDetect:
		_, found := cc.scanner.First(s.str(c, cc.slot, v))
		return found
	}
	return false
}

// groupHolds evaluates an any or all group.
func (c *Compiled) groupHolds(s *scratch, cc *ccond) bool {
	if cc.op == opOutput {
		return s.outputTruncated || c.holds(s, &cc.sub[0])
	}
	any := cc.op == opAny
	for i := range cc.sub {
		if c.holds(s, &cc.sub[i]) == any {
			return any
		}
	}
	return !any
}

// scratch caches, per evaluation, each field path's resolved value and its
// stringified form, so a thousand rules over input.command resolve it once.
// It is pooled so evaluation does not allocate.
type scratch struct {
	req      Request
	now      time.Time
	warnings []string // reasons of warn verdicts, in scan order
	// outputTruncated: conditions on output.text and output.structured
	// hold (EvalOptions.OutputTruncated).
	outputTruncated bool
	usage           Usage
	shared          SharedUsage
	view            view
	tick            uint32   // last generation handed out
	gen             uint32   // this evaluation's: slots read from the request
	rgen            uint32   // this resource's: slots rooted at resource
	cur             int      // the resource under evaluation, in modeResource
	curRes          Request  // its object; nil outside a per-resource evaluation
	seen            []uint32 // == generation: vals/present valid
	strSeen         []uint32 // == generation: strs valid
	vals            []any
	present         []bool
	strs            []string
}

func newScratch(n int) *scratch {
	return &scratch{seen: make([]uint32, n), strSeen: make([]uint32, n),
		vals: make([]any, n), present: make([]bool, n), strs: make([]string, n)}
}

func (s *scratch) reset(req Request, now time.Time, usage Usage, shared SharedUsage) {
	s.req, s.now, s.usage, s.shared = req, now, usage, shared
	s.leaveResource() // in case a panic left the last evaluation inside one
	clear(s.warnings) // drop references to the last request's reasons
	s.warnings = s.warnings[:0]
	if s.view.ready {
		s.view.clear()
	}
	s.gen = s.next()
}

// next hands out a generation no slot holds yet.
func (s *scratch) next() uint32 {
	s.tick++
	if s.tick == 0 { // wrapped: stale marks could look current
		clear(s.seen)
		clear(s.strSeen)
		s.tick = 1
	}
	return s.tick
}

// enterResource makes paths rooted at resource read resource i of the
// request; leaveResource makes them read the request again.
func (s *scratch) enterResource(i int) {
	s.cur, s.curRes, s.rgen = i, s.view.resources[i].obj, s.next()
}

func (s *scratch) leaveResource() { s.cur, s.curRes = 0, nil }

// generation is the mark valid for slot now: a slot rooted at resource
// changes with the resource under evaluation.
func (s *scratch) generation(c *Compiled, slot int32) uint32 {
	if s.curRes != nil && c.resourceSlot[slot] {
		return s.rgen
	}
	return s.gen
}

func (s *scratch) value(c *Compiled, slot int32) (any, bool) {
	if g := s.generation(c, slot); s.seen[slot] != g {
		if g == s.gen {
			s.vals[slot], s.present[slot] = c.paths[slot].Resolve(s.req)
		} else {
			s.vals[slot], s.present[slot] = c.paths[slot][1:].Resolve(s.curRes)
		}
		s.seen[slot] = g
	}
	return s.vals[slot], s.present[slot]
}

func (s *scratch) str(c *Compiled, slot int32, v any) string {
	if str, ok := v.(string); ok {
		return str
	}
	return s.stringified(c, slot, v)
}

// stringified caches Stringify per slot: for a number or object it allocates.
func (s *scratch) stringified(c *Compiled, slot int32, v any) string {
	if g := s.generation(c, slot); s.strSeen[slot] != g {
		s.strs[slot] = Stringify(v)
		s.strSeen[slot] = g
	}
	return s.strs[slot]
}
