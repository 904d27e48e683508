package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
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
}

// budgetCheckEvery is how many rules pass between clock reads: reading the
// clock per rule would cost more than most rules.
const budgetCheckEvery = 32

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
	res := c.evaluate(req, &opts, &clk, &tr)
	res.Trace, res.TraceTruncated = tr.rules, tr.truncated
	res.LatencyMs = float64(clk.elapsed().Nanoseconds()) / 1e6
	return res
}

// tracer collects the trace of one evaluation, within its bound.
type tracer struct {
	on        bool
	left      int // entries the trace may still take
	rules     []TraceRule
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

// evaluate decides; the trace, when asked for, goes to tr, and Evaluate
// puts it in the result.
func (c *Compiled) evaluate(req Request, opts *EvalOptions, clk *clock, tr *tracer) Result {
	start := clk.start
	if c == nil {
		return Result{Decision: Deny, Code: CodeNoPolicies, Reason: "no policy bundle is loaded"}
	}
	if e := c.frozenFor(req, opts.ServiceAccount, start); e != nil {
		return Result{Decision: Deny, Code: CodeAgentFrozen, Reason: e.Reason}
	}
	if len(c.policies) == 0 {
		return Result{Decision: Deny, Code: CodeNoPolicies, Reason: "the bundle has no policies"}
	}
	budget := opts.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}

	s := c.scratch.Get().(*scratch)
	defer c.scratch.Put(s)
	s.reset(req)

	var allowP *cpolicy
	var allowR *crule
	tool, toolIsString := req["tool_name"].(string)
	steps := 0
	for pi := range c.policies {
		p := &c.policies[pi]
		if p.compileError != "" {
			if tr.on && tr.fits(0) {
				tr.rules = append(tr.rules, TraceRule{PolicyID: p.id, RuleIndex: -1, CompileError: p.compileError})
			}
			return Result{Decision: Deny, Code: CodePolicyCompileError, Reason: p.compileError,
				MatchedPolicyID: p.id, MatchedPolicyVersion: p.version}
		}
		it := p.candidates(tool, toolIsString)
		for ri, ok := it.next(); ok; ri, ok = it.next() {
			r := &p.rules[ri]
			steps++
			if steps%budgetCheckEvery == 0 && clk.elapsed() > budget {
				return timeout(budget, steps)
			}
			var matched bool
			if tr.on && tr.fits(len(r.conditions)) {
				var t TraceRule
				matched, t = c.explainRule(s, p, int(ri), r)
				tr.rules = append(tr.rules, t)
			} else {
				matched = c.ruleMatches(s, r)
			}
			if r.usesRegex && clk.elapsed() > budget {
				return timeout(budget, steps)
			}
			if !matched {
				continue
			}
			if r.deny {
				return Result{Decision: Deny, MatchedPolicyID: p.id, MatchedPolicyVersion: p.version,
					MatchedRuleID: r.id, Reason: r.reason}
			}
			allowP, allowR = p, r
		}
	}
	if allowR != nil {
		return Result{Decision: Allow, MatchedPolicyID: allowP.id, MatchedPolicyVersion: allowP.version,
			MatchedRuleID: allowR.id, Reason: allowR.reason}
	}
	first := &c.policies[0]
	if first.defaultDeny {
		return Result{Decision: Deny, Reason: first.defaultReason}
	}
	return Result{Decision: Allow}
}

func timeout(budget time.Duration, steps int) Result {
	return Result{Decision: Deny, Code: CodeEvalTimeout,
		Reason: fmt.Sprintf("evaluation exceeded its %v budget after %d rules", budget, steps)}
}

// frozenFor is the unexpired freeze that stops this call, if any: one
// naming the request's agent_id, or the caller's service account (which the
// caller vouches for; a request cannot name it).
func (c *Compiled) frozenFor(req Request, serviceAccount string, now time.Time) *frozenEntry {
	if agent, ok := req["agent_id"].(string); ok {
		if e := c.frozenEntry(agent, now); e != nil {
			return e
		}
	}
	if serviceAccount == "" {
		return nil
	}
	return unexpired(c.frozen.byServiceAccount[serviceAccount], now)
}

// frozenEntry finds an unexpired freeze for agent, comparing as
// strings.EqualFold does, without allocating for ordinary ids.
func (c *Compiled) frozenEntry(agent string, now time.Time) *frozenEntry {
	if len(c.frozen.byAgent) == 0 {
		return nil
	}
	var entries []frozenEntry
	if k, ok := asciiFoldKey(agent); ok {
		entries = c.frozen.byAgent[k]
	} else {
		var buf [128]byte
		entries = c.frozen.byAgent[string(appendFoldKey(buf[:0], agent))]
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

// ruleIter yields a policy's candidate rules in their original order: the
// rules indexed under the request's tool merged with the rules that accept
// any tool.
type ruleIter struct {
	a, b []int32
	i, j int
	all  int32 // when >= 0, yield 0..n-1 instead of merging
	n    int32
}

func (p *cpolicy) candidates(tool string, toolIsString bool) ruleIter {
	if !toolIsString {
		return ruleIter{all: 0, n: int32(len(p.rules))}
	}
	return ruleIter{a: p.byTool[tool], b: p.anyTool, all: -1}
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
	case it.i < len(it.a) && (it.j >= len(it.b) || it.a[it.i] < it.b[it.j]):
		it.i++
		return it.a[it.i-1], true
	case it.j < len(it.b):
		it.j++
		return it.b[it.j-1], true
	}
	return 0, false
}

func (c *Compiled) ruleMatches(s *scratch, r *crule) bool {
	for i := range r.conditions {
		if !c.holds(s, &r.conditions[i]) {
			return false
		}
	}
	return true
}

func (c *Compiled) explainRule(s *scratch, p *cpolicy, index int, r *crule) (bool, TraceRule) {
	t := TraceRule{PolicyID: p.id, RuleIndex: index, RuleID: r.id, Effect: r.source.Effect, Matched: true}
	for i := range r.conditions {
		cc := &r.conditions[i]
		src := &r.source.Conditions[i]
		held := c.holds(s, cc)
		v, present := s.value(c, cc.slot)
		tc := TraceCondition{Index: i, Field: src.Field, Operator: src.Operator,
			Value: src.Value, Values: src.Values, Present: present, Held: held}
		if present {
			tc.Resolved = truncate(Stringify(v), MaxTraceValue)
		}
		t.Conditions = append(t.Conditions, tc)
		t.Matched = t.Matched && held
	}
	return t.Matched, t
}

// holds evaluates one condition.
func (c *Compiled) holds(s *scratch, cc *ccond) bool {
	v, present := s.value(c, cc.slot)
	switch cc.op {
	case opExists:
		return present
	case opNotExists:
		return !present
	case opIsEmpty:
		return isEmpty(v, present)
	case opIsNotEmpty:
		return !isEmpty(v, present)
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
		return cc.value.equal(v)
	case opNeq:
		return !cc.value.equal(v)
	case opIn:
		return cc.member(s.str(c, cc.slot, v))
	case opNotIn:
		return !cc.member(s.str(c, cc.slot, v))
	case opContains:
		return strings.Contains(s.str(c, cc.slot, v), cc.value.str)
	case opNotContains:
		return !strings.Contains(s.str(c, cc.slot, v), cc.value.str)
	case opStartsWith:
		return strings.HasPrefix(s.str(c, cc.slot, v), cc.value.str)
	case opEndsWith:
		return strings.HasSuffix(s.str(c, cc.slot, v), cc.value.str)
	case opMatches:
		return cc.matcher.match(s.str(c, cc.slot, v))
	case opGt, opGte, opLt, opLte:
		f, ok := numberOf(v)
		if !ok {
			return false
		}
		switch cc.op {
		case opGt:
			return f > cc.value.num
		case opGte:
			return f >= cc.value.num
		case opLt:
			return f < cc.value.num
		}
		return f <= cc.value.num
	case opIsValidJSON:
		str, ok := v.(string)
		return ok && json.Valid([]byte(str))
	}
	return false
}

func (cc *ccond) member(s string) bool {
	if cc.set != nil {
		_, ok := cc.set[s]
		return ok
	}
	for _, x := range cc.list {
		if x == s {
			return true
		}
	}
	return false
}

// scratch caches, per evaluation, each field path's resolved value and its
// stringified form, so a thousand rules over input.command resolve it once.
// It is pooled so evaluation does not allocate.
type scratch struct {
	req     Request
	gen     uint32
	seen    []uint32 // == gen: vals/present valid
	strSeen []uint32 // == gen: strs valid
	vals    []any
	present []bool
	strs    []string
}

func newScratch(n int) *scratch {
	return &scratch{seen: make([]uint32, n), strSeen: make([]uint32, n),
		vals: make([]any, n), present: make([]bool, n), strs: make([]string, n)}
}

func (s *scratch) reset(req Request) {
	s.req = req
	s.gen++
	if s.gen == 0 { // wrapped: stale marks could look current
		clear(s.seen)
		clear(s.strSeen)
		s.gen = 1
	}
}

func (s *scratch) value(c *Compiled, slot int32) (any, bool) {
	if s.seen[slot] != s.gen {
		s.vals[slot], s.present[slot] = c.paths[slot].Resolve(s.req)
		s.seen[slot] = s.gen
	}
	return s.vals[slot], s.present[slot]
}

func (s *scratch) str(c *Compiled, slot int32, v any) string {
	if str, ok := v.(string); ok {
		return str
	}
	return s.stringified(slot, v)
}

// stringified caches Stringify per slot: for a number or object it allocates.
func (s *scratch) stringified(slot int32, v any) string {
	if s.strSeen[slot] != s.gen {
		s.strs[slot] = Stringify(v)
		s.strSeen[slot] = s.gen
	}
	return s.strs[slot]
}
