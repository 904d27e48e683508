package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// tickingClock moves forward by step on every reading, so any budget check
// after the first reading sees the budget spent.
func tickingClock(start time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := now
		now = now.Add(step)
		return t
	}
}

// expect is the part of a Result a case pins down.
type expect struct {
	decision Decision
	code     Code
	policy   string
	version  int64
	rule     string
}

func checkResult(t *testing.T, res Result, want expect) {
	t.Helper()
	checkInvariants(t, res)
	got := expect{res.Decision, res.Code, res.MatchedPolicyID, res.MatchedPolicyVersion, res.MatchedRuleID}
	if want.code != "" {
		// The contract does not say which ids a coded deny carries.
		got.policy, got.version, got.rule = want.policy, want.version, want.rule
	}
	if got != want {
		t.Errorf("result %+v (reason %q), want %+v", got, res.Reason, want)
	}
}

// checkInvariants holds for every result: allow or deny, and every coded
// result is a deny that names no rule.
func checkInvariants(t *testing.T, res Result) {
	t.Helper()
	if res.Decision != Allow && res.Decision != Deny {
		t.Errorf("decision %q is neither allow nor deny", res.Decision)
	}
	if res.Code != "" && (res.Decision != Deny || res.MatchedRuleID != "") {
		t.Errorf("coded result %s is %s with rule %q; coded results are denies from no rule", res.Code, res.Decision, res.MatchedRuleID)
	}
	if res.Code == "" && res.MatchedRuleID == "" && res.MatchedPolicyID != "" {
		t.Errorf("policy %q matched without a rule and without a code", res.MatchedPolicyID)
	}
}

func allowAll(id string) Policy {
	return Policy{ID: id, Version: 1, DefaultEffect: "allow", Rules: []Rule{{ID: "all", Effect: "allow"}}}
}

func denyRule(id string, conds ...Condition) Rule {
	return Rule{ID: id, Effect: "deny", Conditions: conds}
}

func allowRule(id string, conds ...Condition) Rule {
	return Rule{ID: id, Effect: "allow", Conditions: conds}
}

func cond(field, op string, value any) Condition {
	return Condition{Field: field, Operator: op, Value: raw(value)}
}

func TestEvaluateAgentFrozen(t *testing.T) {
	t.Parallel()
	later, earlier := t0.Add(time.Hour), t0.Add(-time.Hour)
	badRegex := Policy{ID: "broken", DefaultEffect: "allow", Rules: []Rule{
		denyRule("bad", cond("input.command", "matches", "(?=x)"))}}
	for _, tc := range []struct {
		name   string
		frozen []FrozenAgent
		polic  []Policy
		agent  any
		want   expect
		reason string // substring of the reason
	}{
		{name: "exact", frozen: []FrozenAgent{{ID: "agent-1", Reason: "incident 42"}}, agent: "agent-1",
			want: expect{decision: Deny, code: CodeAgentFrozen}, reason: "incident 42"},
		{name: "case-insensitive ASCII", frozen: []FrozenAgent{{ID: "Agent-1"}}, agent: "aGENT-1",
			want: expect{decision: Deny, code: CodeAgentFrozen}, reason: "Agent-1"},
		{name: "Kelvin sign in the request", frozen: []FrozenAgent{{ID: "AGENT-K", Reason: "r"}}, agent: "agent-\u212a",
			want: expect{decision: Deny, code: CodeAgentFrozen}},
		{name: "Kelvin sign in the freeze", frozen: []FrozenAgent{{ID: "agent-\u212a", Reason: "r"}}, agent: "AGENT-k",
			want: expect{decision: Deny, code: CodeAgentFrozen}},
		{name: "long s", frozen: []FrozenAgent{{ID: "SAM"}}, agent: "\u017fam",
			want: expect{decision: Deny, code: CodeAgentFrozen}},
		{name: "sharp s", frozen: []FrozenAgent{{ID: "stra\u00dfe"}}, agent: "STRA\u1e9eE",
			want: expect{decision: Deny, code: CodeAgentFrozen}},
		{name: "Greek sigma forms", frozen: []FrozenAgent{{ID: "\u03a3\u03c3"}}, agent: "\u03c2\u03a3",
			want: expect{decision: Deny, code: CodeAgentFrozen}},
		{name: "ss is not sharp s (no full folding)", frozen: []FrozenAgent{{ID: "strasse"}}, agent: "stra\u00dfe",
			want: expect{decision: Allow, policy: "p", version: 1, rule: "all"}},
		{name: "dotted I is not i", frozen: []FrozenAgent{{ID: "i"}}, agent: "\u0130",
			want: expect{decision: Allow, policy: "p", version: 1, rule: "all"}},
		{name: "other agent", frozen: []FrozenAgent{{ID: "agent-1"}}, agent: "agent-12",
			want: expect{decision: Allow, policy: "p", version: 1, rule: "all"}},
		{name: "no agent_id", frozen: []FrozenAgent{{ID: "agent-1"}}, agent: nil,
			want: expect{decision: Allow, policy: "p", version: 1, rule: "all"}},
		{name: "not yet expired", frozen: []FrozenAgent{{ID: "agent-1", ExpiresAt: &later}}, agent: "agent-1",
			want: expect{decision: Deny, code: CodeAgentFrozen}},
		{name: "expired", frozen: []FrozenAgent{{ID: "agent-1", ExpiresAt: &earlier}}, agent: "agent-1",
			want: expect{decision: Allow, policy: "p", version: 1, rule: "all"}},
		{name: "one of two freezes expired", frozen: []FrozenAgent{{ID: "agent-1", ExpiresAt: &earlier},
			{ID: "AGENT-1", ExpiresAt: &later, Reason: "still"}}, agent: "agent-1",
			want: expect{decision: Deny, code: CodeAgentFrozen}, reason: "still"},
		{name: "before NO_POLICIES", frozen: []FrozenAgent{{ID: "agent-1"}}, polic: []Policy{}, agent: "agent-1",
			want: expect{decision: Deny, code: CodeAgentFrozen}},
		{name: "unfrozen agent and no policies", frozen: []FrozenAgent{{ID: "agent-1"}}, polic: []Policy{}, agent: "agent-2",
			want: expect{decision: Deny, code: CodeNoPolicies}},
		{name: "before POLICY_COMPILE_ERROR", frozen: []FrozenAgent{{ID: "agent-1"}}, polic: []Policy{badRegex}, agent: "agent-1",
			want: expect{decision: Deny, code: CodeAgentFrozen}},
		// allAgents: every agent, with or without an agent_id.
		{name: "every agent", frozen: []FrozenAgent{{All: true, Reason: "INC-24"}}, agent: "agent-2",
			want: expect{decision: Deny, code: CodeAgentFrozen}, reason: "INC-24"},
		{name: "every agent, no agent_id", frozen: []FrozenAgent{{All: true}}, agent: nil,
			want: expect{decision: Deny, code: CodeAgentFrozen}, reason: "every agent of the namespace is frozen"},
		{name: "every agent, expired", frozen: []FrozenAgent{{All: true, ExpiresAt: &earlier}}, agent: "agent-2",
			want: expect{decision: Allow, policy: "p", version: 1, rule: "all"}},
		{name: "the agent's own freeze before every agent's", frozen: []FrozenAgent{{All: true, Reason: "all"}, {ID: "agent-1", Reason: "mine"}}, agent: "agent-1",
			want: expect{decision: Deny, code: CodeAgentFrozen}, reason: "mine"},
		{name: "every agent, before NO_POLICIES", frozen: []FrozenAgent{{All: true}}, polic: []Policy{}, agent: "agent-2",
			want: expect{decision: Deny, code: CodeAgentFrozen}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			policies := tc.polic
			if policies == nil {
				policies = []Policy{allowAll("p")}
			}
			c, _ := Compile(Bundle{Policies: policies, FrozenAgents: tc.frozen})
			req := Request{"tool_name": "Bash"}
			if tc.agent != nil {
				req["agent_id"] = tc.agent
			}
			record(t, Bundle{Policies: policies, FrozenAgents: tc.frozen}, req, t0, nil, nil)
			res := c.Evaluate(req, EvalOptions{Now: fixedClock(t0)})
			checkResult(t, res, tc.want)
			if !strings.Contains(strings.ToLower(res.Reason), strings.ToLower(tc.reason)) {
				t.Errorf("reason %q does not contain %q", res.Reason, tc.reason)
			}
			if res.Code == CodeAgentFrozen && res.Reason == "" {
				t.Error("a frozen deny needs a reason")
			}
		})
	}
}

// TestEvaluateFreezeExpiresWithTheClock: the same compiled bundle freezes or
// not depending only on the clock passed in.
func TestEvaluateFreezeExpiresWithTheClock(t *testing.T) {
	t.Parallel()
	expires := t0.Add(10 * time.Minute)
	c := mustCompile(t, Bundle{Policies: []Policy{allowAll("p")},
		FrozenAgents: []FrozenAgent{{ID: "agent-1", ExpiresAt: &expires}}})
	req := Request{"tool_name": "Bash", "agent_id": "agent-1"}
	for _, tc := range []struct {
		now  time.Time
		want Decision
	}{
		{t0, Deny},
		{expires.Add(-time.Nanosecond), Deny},
		{expires.Add(time.Nanosecond), Allow},
		{t0.Add(24 * time.Hour), Allow},
	} {
		if got := c.Evaluate(req, EvalOptions{Now: fixedClock(tc.now)}); got.Decision != tc.want {
			t.Errorf("at %v: %s (%s), want %s", tc.now, got.Decision, got.Code, tc.want)
		}
	}
}

func TestEvaluateNoPolicies(t *testing.T) {
	t.Parallel()
	var nilCompiled *Compiled
	empty, _ := Compile(Bundle{})
	emptyList, _ := Compile(Bundle{Policies: []Policy{}, FrozenAgents: []FrozenAgent{}})
	for name, c := range map[string]*Compiled{"nil": nilCompiled, "empty bundle": empty, "empty lists": emptyList} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := c.Evaluate(Request{"tool_name": "Bash", "agent_id": "a"}, EvalOptions{})
			checkResult(t, res, expect{decision: Deny, code: CodeNoPolicies})
			if res.Reason == "" {
				t.Error("NO_POLICIES needs a reason")
			}
		})
	}
}

func TestEvaluatePolicyCompileError(t *testing.T) {
	t.Parallel()
	broken := func(id string, prio int32) Policy {
		return Policy{ID: id, Version: 4, Priority: prio, DefaultEffect: "allow", Rules: []Rule{
			allowRule("fine"),
			denyRule("lookahead", cond("tool_name", "eq", "NeverThisTool"), cond("input.command", "matches", "rm(?=x)")),
		}}
	}
	denier := func(id string, prio int32) Policy {
		return Policy{ID: id, Version: 2, Priority: prio, DefaultEffect: "allow", Rules: []Rule{
			denyRule("no-rm", cond("input.command", "contains", "rm"))}}
	}
	allower := func(id string, prio int32) Policy {
		p := allowAll(id)
		p.Priority = prio
		return p
	}
	coded := expect{decision: Deny, code: CodePolicyCompileError}
	for _, tc := range []struct {
		name     string
		policies []Policy
		command  string
		want     expect
	}{
		{name: "only policy", policies: []Policy{broken("broken", 0)}, command: "ls", want: coded},
		{name: "its rules would not match this tool", policies: []Policy{broken("broken", 0)}, command: "rm", want: coded},
		{name: "higher-priority deny returns first", policies: []Policy{broken("broken", 0), denier("guard", 10)},
			command: "rm -rf /", want: expect{decision: Deny, policy: "guard", version: 2, rule: "no-rm"}},
		{name: "higher-priority deny that does not match", policies: []Policy{broken("broken", 0), denier("guard", 10)},
			command: "ls", want: coded},
		{name: "earlier allow does not stop the scan", policies: []Policy{broken("broken", 0), allower("open", 10)},
			command: "ls", want: coded},
		{name: "same priority, name before", policies: []Policy{denier("b-guard", 0), broken("a-broken", 0)},
			command: "rm", want: coded},
		{name: "same priority, name after", policies: []Policy{broken("b-broken", 0), denier("a-guard", 0)},
			command: "rm", want: expect{decision: Deny, policy: "a-guard", version: 2, rule: "no-rm"}},
		{name: "lower priority is still reached by an allow", policies: []Policy{broken("broken", -5), allower("open", 0)},
			command: "ls", want: coded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, diags := Compile(Bundle{Policies: tc.policies})
			if len(diags) == 0 {
				t.Fatal("the broken policy produced no diagnostics")
			}
			req := Request{"tool_name": "Bash", "input": map[string]any{"command": tc.command}}
			record(t, Bundle{Policies: tc.policies}, req, t0, nil, nil)
			res := c.Evaluate(req, EvalOptions{})
			checkResult(t, res, tc.want)
			if res.Code == CodePolicyCompileError {
				for _, s := range []string{"broken", "lookahead", "rm(?=x)"} {
					if !strings.Contains(res.Reason, s) {
						t.Errorf("reason %q does not name %q (policy, rule and pattern)", res.Reason, s)
					}
				}
			}
		})
	}
}

func TestEvaluateTimeout(t *testing.T) {
	t.Parallel()
	manyAllows := Policy{ID: "many", DefaultEffect: "allow"}
	for i := range 200 {
		manyAllows.Rules = append(manyAllows.Rules, allowRule(fmt.Sprintf("r%d", i), cond("tool_name", "neq", "x")))
	}
	regex := Policy{ID: "regex", DefaultEffect: "allow", Rules: []Rule{
		allowRule("re", cond("input.command", "matches", `^l[a-z]+\s`))}}
	req := Request{"tool_name": "Bash", "input": map[string]any{"command": "ls -la"}}
	timedOut := expect{decision: Deny, code: CodeEvalTimeout}
	for _, tc := range []struct {
		name    string
		policy  Policy
		opts    EvalOptions
		explain bool
		want    expect
	}{
		{name: "matching allows, clock past budget", policy: manyAllows,
			opts: EvalOptions{Now: tickingClock(t0, time.Second)}, want: timedOut},
		{name: "with explain", policy: manyAllows,
			opts: EvalOptions{Now: tickingClock(t0, time.Second), Explain: true}, want: timedOut},
		{name: "regex rule, clock past budget", policy: regex,
			opts: EvalOptions{Now: tickingClock(t0, time.Second)}, want: timedOut},
		{name: "configured budget not reached", policy: manyAllows,
			opts: EvalOptions{Now: tickingClock(t0, time.Second), Budget: 1000 * time.Hour},
			want: expect{decision: Allow, policy: "many", version: 1, rule: "r199"}},
		{name: "configured budget exceeded", policy: manyAllows,
			opts: EvalOptions{Now: tickingClock(t0, time.Millisecond), Budget: 2 * time.Millisecond}, want: timedOut},
		{name: "default budget not reached", policy: manyAllows,
			opts: EvalOptions{Now: tickingClock(t0, time.Microsecond)},
			want: expect{decision: Allow, policy: "many", version: 1, rule: "r199"}},
		{name: "stopped clock", policy: regex, opts: EvalOptions{Now: fixedClock(t0)},
			want: expect{decision: Allow, policy: "regex", version: 1, rule: "re"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := mustCompile(t, Bundle{Policies: []Policy{tc.policy}})
			res := c.Evaluate(req, tc.opts)
			checkResult(t, res, tc.want)
			if res.Code == CodeEvalTimeout && !strings.Contains(res.Reason, "budget") {
				t.Errorf("reason %q does not mention the budget", res.Reason)
			}
		})
	}
}

// TestEveryCodedResultIsADeny drives each code through several bundles and
// clocks and checks the invariant on all of them.
func TestEveryCodedResultIsADeny(t *testing.T) {
	t.Parallel()
	many := Policy{ID: "many", DefaultEffect: "allow"}
	for i := range 100 {
		many.Rules = append(many.Rules, allowRule(fmt.Sprintf("r%d", i)))
	}
	bundles := []Bundle{
		{},
		{FrozenAgents: []FrozenAgent{{ID: "agent-1"}}},
		{Policies: []Policy{many}, FrozenAgents: []FrozenAgent{{ID: "agent-1"}}},
		{Policies: []Policy{{ID: "bad", Rules: []Rule{allowRule("x", cond("a", "matches", "("))}}}},
		{Policies: []Policy{{ID: "bad", DefaultEffect: "nope", Rules: []Rule{allowRule("x")}}}},
		{Policies: []Policy{many, {ID: "deny-default", DefaultEffect: "deny", Priority: 1,
			Rules: []Rule{denyRule("never", Condition{Field: "x", Operator: "exists"})}}}},
	}
	seen := map[Code]bool{}
	for bi, b := range bundles {
		c, _ := Compile(b)
		for _, agent := range []string{"agent-1", "AGENT-1", "other"} {
			for _, clock := range []func() time.Time{fixedClock(t0), tickingClock(t0, time.Second)} {
				for _, explain := range []bool{false, true} {
					res := c.Evaluate(Request{"tool_name": "Bash", "agent_id": agent}, EvalOptions{Now: clock, Explain: explain})
					t.Run(fmt.Sprintf("bundle%d/%s/%v", bi, agent, explain), func(t *testing.T) { checkInvariants(t, res) })
					seen[res.Code] = true
				}
			}
		}
	}
	for _, code := range []Code{CodeAgentFrozen, CodeNoPolicies, CodePolicyCompileError, CodeEvalTimeout, ""} {
		if !seen[code] {
			t.Errorf("no case produced code %q", code)
		}
	}
}

func TestEvaluateOrder(t *testing.T) {
	t.Parallel()
	rm := cond("input.command", "contains", "rm")
	withPrio := func(p Policy, prio int32, version int64) Policy {
		p.Priority, p.Version = prio, version
		return p
	}
	pol := func(id, def string, rules ...Rule) Policy {
		return Policy{ID: id, Version: 1, DefaultEffect: def, Rules: rules}
	}
	for _, tc := range []struct {
		name     string
		policies []Policy
		want     expect
		reason   string
	}{
		{name: "first deny in a policy wins",
			policies: []Policy{pol("p", "allow", allowRule("a"), denyRule("d1", rm), denyRule("d2", rm))},
			want:     expect{decision: Deny, policy: "p", version: 1, rule: "d1"}},
		{name: "deny after an allow wins",
			policies: []Policy{pol("p", "allow", allowRule("a", rm), allowRule("b"), denyRule("d", rm), allowRule("c"))},
			want:     expect{decision: Deny, policy: "p", version: 1, rule: "d"}},
		{name: "last allow wins",
			policies: []Policy{pol("p", "deny", allowRule("a"), allowRule("b", rm), allowRule("c", cond("tool_name", "eq", "Edit")))},
			want:     expect{decision: Allow, policy: "p", version: 1, rule: "b"}},
		{name: "higher priority deny wins over a name that sorts first",
			policies: []Policy{pol("a", "allow", denyRule("low", rm)), withPrio(pol("z", "allow", denyRule("high", rm)), 10, 3)},
			want:     expect{decision: Deny, policy: "z", version: 3, rule: "high"}},
		{name: "same priority: name ascending",
			policies: []Policy{pol("b", "allow", denyRule("from-b", rm)), pol("a", "allow", denyRule("from-a", rm))},
			want:     expect{decision: Deny, policy: "a", version: 1, rule: "from-a"}},
		{name: "negative priority runs last",
			policies: []Policy{withPrio(pol("a", "allow", denyRule("neg", rm)), -1, 1), pol("b", "allow", denyRule("zero", rm))},
			want:     expect{decision: Deny, policy: "b", version: 1, rule: "zero"}},
		{name: "last allow across policies",
			policies: []Policy{withPrio(pol("first", "deny", allowRule("x")), 5, 2), withPrio(pol("second", "deny", allowRule("y")), 1, 7)},
			want:     expect{decision: Allow, policy: "second", version: 7, rule: "y"}},
		{name: "deny in a later policy beats an earlier allow",
			policies: []Policy{withPrio(pol("first", "allow", allowRule("x")), 5, 1), pol("second", "allow", denyRule("y", rm))},
			want:     expect{decision: Deny, policy: "second", version: 1, rule: "y"}},
		{name: "unset version is 1",
			policies: []Policy{withPrio(pol("p", "allow", denyRule("d")), 0, 0)},
			want:     expect{decision: Deny, policy: "p", version: 1, rule: "d"}},
		{name: "nothing matched: highest priority policy's default",
			policies: []Policy{pol("a", "deny", denyRule("x", cond("tool_name", "eq", "Edit"))), withPrio(pol("z", "allow", denyRule("y", cond("tool_name", "eq", "Edit"))), 9, 1)},
			want:     expect{decision: Allow}},
		{name: "nothing matched: highest priority policy's default deny",
			policies: []Policy{pol("a", "allow", denyRule("x", cond("tool_name", "eq", "Edit"))), withPrio(pol("z", "deny", denyRule("y", cond("tool_name", "eq", "Edit"))), 9, 1)},
			want:     expect{decision: Deny}},
		{name: "nothing matched: same priority, first name's default",
			policies: []Policy{pol("b", "allow", denyRule("x", cond("tool_name", "eq", "Edit"))), pol("a", "deny", denyRule("y", cond("tool_name", "eq", "Edit")))},
			want:     expect{decision: Deny}},
		{name: "nothing matched: unset default is allow",
			policies: []Policy{pol("a", "", denyRule("x", cond("tool_name", "eq", "Edit")))},
			want:     expect{decision: Allow}},
		{name: "deny reason is the description",
			policies: []Policy{pol("p", "allow", Rule{ID: "d", Effect: "deny", Description: "no rm, ever", Conditions: []Condition{rm}})},
			want:     expect{decision: Deny, policy: "p", version: 1, rule: "d"}, reason: "no rm, ever"},
		{name: "deny reason without description names rule and policy",
			policies: []Policy{pol("the-policy", "allow", denyRule("the-rule", rm))},
			want:     expect{decision: Deny, policy: "the-policy", version: 1, rule: "the-rule"}, reason: "the-rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := mustCompile(t, Bundle{Policies: tc.policies})
			req := Request{"tool_name": "Bash", "input": map[string]any{"command": "rm -rf /"}}
			record(t, Bundle{Policies: tc.policies}, req, t0, nil, nil)
			res := c.Evaluate(req, EvalOptions{})
			checkResult(t, res, tc.want)
			if !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", res.Reason, tc.reason)
			}
			if tc.want.rule == "" && tc.want.code == "" {
				if res.MatchedPolicyID != "" || res.MatchedRuleID != "" || res.MatchedPolicyVersion != 0 {
					t.Errorf("a default decision names a match: %+v", res)
				}
			}
			if strings.Contains(tc.name, "names rule and policy") && !strings.Contains(res.Reason, "the-policy") {
				t.Errorf("reason %q does not name the policy", res.Reason)
			}
		})
	}
}

// TestToolIndexKeepsScanOrder mixes rules the engine can index by tool_name
// with rules it cannot, and checks that the decision is the one a plain scan
// in rule order gives.
func TestToolIndexKeepsScanOrder(t *testing.T) {
	t.Parallel()
	rm := cond("input.command", "contains", "rm")
	p := Policy{ID: "p", Version: 1, DefaultEffect: "deny", Rules: []Rule{
		allowRule("bash-eq", cond("tool_name", "eq", "Bash")), // 0
		denyRule("any-rm", rm),                                // 1
		{ID: "bash-edit-in", Effect: "allow", Conditions: []Condition{{Field: "tool_name", Operator: "in", Values: []json.RawMessage{raw("Bash"), raw("Edit")}}}}, // 2
		denyRule("edit-eq", cond("tool_name", "eq", "Edit")), // 3
		allowRule("no-tool"),                              // 4
		denyRule("number-eq", cond("tool_name", "eq", 5)), // 5
		{ID: "number-in", Effect: "allow", Conditions: []Condition{{Field: "tool_name", Operator: "in", Values: []json.RawMessage{raw(5)}}}},                    // 6
		denyRule("write-rm", cond("input.command", "contains", "rm"), cond("tool_name", "eq", "Write")),                                                         // 7
		allowRule("neq-bash", cond("tool_name", "neq", "Bash")),                                                                                                 // 8
		denyRule("two-tools", cond("tool_name", "eq", "Read"), cond("tool_name", "eq", "Grep")),                                                                 // 9
		{ID: "read-value", Effect: "allow", Conditions: []Condition{{Field: "tool_name", Operator: "in", Value: raw("Read")}}},                                  // 10
		{ID: "glob-second", Effect: "deny", Conditions: []Condition{{Field: "tool_name", Operator: "in", Values: []json.RawMessage{raw("Grep"), raw("Glob")}}}}, // 11
	}}
	c := mustCompile(t, Bundle{Policies: []Policy{p}})
	for _, tc := range []struct {
		name string
		tool any // nil: absent
		cmd  string
		want expect
	}{
		{"Bash ls", "Bash", "ls", expect{decision: Allow, policy: "p", version: 1, rule: "no-tool"}},
		{"Bash rm", "Bash", "rm", expect{decision: Deny, policy: "p", version: 1, rule: "any-rm"}},
		{"Edit ls", "Edit", "ls", expect{decision: Deny, policy: "p", version: 1, rule: "edit-eq"}},
		{"Write ls", "Write", "ls", expect{decision: Allow, policy: "p", version: 1, rule: "neq-bash"}},
		{"Read ls", "Read", "ls", expect{decision: Allow, policy: "p", version: 1, rule: "read-value"}},
		{"Glob, a second in value", "Glob", "ls", expect{decision: Deny, policy: "p", version: 1, rule: "glob-second"}},
		{"string 5", "5", "ls", expect{decision: Allow, policy: "p", version: 1, rule: "neq-bash"}},
		{"number 5", 5.0, "ls", expect{decision: Deny, policy: "p", version: 1, rule: "number-eq"}},
		{"number 6", 6.0, "ls", expect{decision: Allow, policy: "p", version: 1, rule: "neq-bash"}},
		{"bool", true, "ls", expect{decision: Allow, policy: "p", version: 1, rule: "neq-bash"}},
		{"array", []any{"Bash"}, "ls", expect{decision: Allow, policy: "p", version: 1, rule: "neq-bash"}},
		{"absent", nil, "ls", expect{decision: Allow, policy: "p", version: 1, rule: "neq-bash"}},
		{"absent rm", nil, "rm", expect{decision: Deny, policy: "p", version: 1, rule: "any-rm"}},
		{"null", "null-marker", "ls", expect{decision: Allow, policy: "p", version: 1, rule: "neq-bash"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := Request{"input": map[string]any{"command": tc.cmd}}
			switch tc.tool {
			case nil:
			case "null-marker":
				req["tool_name"] = nil
			default:
				req["tool_name"] = tc.tool
			}
			for _, explain := range []bool{false, true} {
				checkResult(t, c.Evaluate(req, EvalOptions{Explain: explain}), tc.want)
			}
			ref := refEvaluate(Bundle{Policies: []Policy{p}}, req, t0)
			if got := (expect{ref.Decision, ref.Code, ref.PolicyID, ref.Version, ref.RuleID}); got != tc.want {
				t.Errorf("the reference evaluator says %+v; the table is wrong", got)
			}
		})
	}
}

func TestExplainTrace(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 1000)
	c, _ := Compile(Bundle{Policies: []Policy{
		{ID: "p", Version: 2, Priority: 1, DefaultEffect: "allow", Rules: []Rule{
			denyRule("three", cond("input.command", "contains", "zzz"), cond("tool_name", "eq", "Bash"),
				Condition{Field: "input.nope", Operator: "exists"}),
			allowRule("bash", cond("tool_name", "eq", "Bash")),
		}},
		{ID: "q", DefaultEffect: "allow", Rules: []Rule{denyRule("bad", cond("a", "matches", "a(?!b)"))}},
	}})
	req := Request{"tool_name": "Bash", "input": map[string]any{"command": long}}
	if res := c.Evaluate(req, EvalOptions{}); res.Trace != nil {
		t.Errorf("a trace without Explain: %+v", res.Trace)
	}
	res := c.Evaluate(req, EvalOptions{Explain: true})
	checkResult(t, res, expect{decision: Deny, code: CodePolicyCompileError, policy: "q", version: 1})
	if len(res.Trace) != 3 {
		t.Fatalf("trace has %d rules, want 3 (two rules of p, then q's compile error): %+v", len(res.Trace), res.Trace)
	}
	first := res.Trace[0]
	if first.PolicyID != "p" || first.RuleID != "three" || first.RuleIndex != 0 || first.Matched || first.Effect != "deny" {
		t.Errorf("first rule: %+v", first)
	}
	if len(first.Conditions) != 3 {
		t.Fatalf("first rule has %d conditions in the trace, want 3", len(first.Conditions))
	}
	c0, c1, c2 := first.Conditions[0], first.Conditions[1], first.Conditions[2]
	if c0.Held || !c0.Present || c0.Field != "input.command" || c0.Operator != "contains" || string(c0.Value) != `"zzz"` {
		t.Errorf("condition 0: %+v", c0)
	}
	if len(c0.Resolved) >= len(long) || len(c0.Resolved) > MaxTraceValue+8 || !strings.HasPrefix(long, strings.TrimSuffix(c0.Resolved, "...")) || len(c0.Resolved) < 16 {
		t.Errorf("condition 0 resolved to %d bytes %q..., want a truncated prefix of the command", len(c0.Resolved), c0.Resolved[:min(20, len(c0.Resolved))])
	}
	if !c1.Held || !c1.Present || c1.Resolved != "Bash" || c1.Index != 1 {
		t.Errorf("condition 1: %+v", c1)
	}
	if c2.Held || c2.Present || c2.Resolved != "" || c2.Index != 2 {
		t.Errorf("condition 2: %+v", c2)
	}
	if second := res.Trace[1]; second.RuleID != "bash" || !second.Matched || second.RuleIndex != 1 || len(second.Conditions) != 1 || !second.Conditions[0].Held {
		t.Errorf("second rule: %+v", second)
	}
	if third := res.Trace[2]; third.PolicyID != "q" || !strings.Contains(third.CompileError, "a(?!b)") {
		t.Errorf("compile error entry: %+v", third)
	}
	// The trace survives the JSON round trip a CLI user sees.
	doc, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(doc, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Trace, res.Trace) {
		t.Errorf("trace changed in JSON:\n%+v\n%+v", back.Trace, res.Trace)
	}
}

// An explain trace is bounded: past MaxTrace entries (a rule and each of
// its conditions count one) the rules that follow are evaluated but not
// traced, traceTruncated says so, and the decision does not change.
func TestExplainTraceIsBounded(t *testing.T) {
	t.Parallel()
	rules := make([]Rule, 500)
	for i := range rules {
		rules[i] = allowRule(fmt.Sprintf("r%d", i), cond("tool_name", "eq", "Bash"), cond("input.command", "contains", "ls"))
	}
	rules = append(rules, denyRule("last", cond("input.command", "contains", "rm")))
	c := mustCompile(t, Bundle{Policies: []Policy{{ID: "p", DefaultEffect: "allow", Rules: rules}}})
	req := Request{"tool_name": "Bash", "input": map[string]any{"command": "ls; rm -rf /"}}
	full := c.Evaluate(req, EvalOptions{Explain: true})
	if full.TraceTruncated || len(full.Trace) != 501 || traceEntries(full.Trace) != 1502 {
		t.Fatalf("unbounded trace: %d rules, %d entries, truncated %v", len(full.Trace), traceEntries(full.Trace), full.TraceTruncated)
	}
	for _, max := range []int{1, 2, 3, 4, 100, 1501, 1502} {
		res := c.Evaluate(req, EvalOptions{Explain: true, MaxTrace: max})
		if res.Decision != Deny || res.MatchedRuleID != "last" {
			t.Errorf("max %d: decided %s by %q, want deny by last", max, res.Decision, res.MatchedRuleID)
		}
		n := traceEntries(res.Trace)
		if n > max || n < max-2 || res.TraceTruncated != (max < 1502) {
			t.Errorf("max %d: %d entries, truncated %v", max, n, res.TraceTruncated)
		}
		if len(res.Trace) > 0 && !reflect.DeepEqual(res.Trace, full.Trace[:len(res.Trace)]) {
			t.Errorf("max %d: the bounded trace is not the start of the full one", max)
		}
		out, _ := res.AppendJSON(nil)
		if strings.Contains(string(out), `"traceTruncated":true`) != res.TraceTruncated {
			t.Errorf("max %d: JSON %s", max, out[len(out)-40:])
		}
	}
}

func traceEntries(trace []TraceRule) int {
	n := 0
	for _, r := range trace {
		n += 1 + len(r.Conditions)
	}
	return n
}

// TestExplainTraceTruncatesOnRuneBoundary: a truncated multi-byte value must
// stay valid UTF-8, or the JSON a user reads would carry U+FFFD garbage.
func TestExplainTraceTruncatesOnRuneBoundary(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, Bundle{Policies: []Policy{{ID: "p", DefaultEffect: "allow", Rules: []Rule{
		allowRule("r", cond("input.command", "contains", "x"))}}}})
	for pad := range 4 {
		cmd := strings.Repeat("a", pad) + strings.Repeat("\u20ac", 200)
		res := c.Evaluate(Request{"tool_name": "Bash", "input": map[string]any{"command": cmd}}, EvalOptions{Explain: true})
		got := res.Trace[0].Conditions[0].Resolved
		if !utf8ValidString(got) {
			t.Errorf("pad %d: truncated value is not valid UTF-8: %q", pad, got[len(got)-8:])
		}
	}
}

func utf8ValidString(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }

func TestResultJSON(t *testing.T) {
	t.Parallel()
	c, _ := Compile(Bundle{Policies: []Policy{{ID: "p", Version: 3, DefaultEffect: "allow", Rules: []Rule{
		denyRule("no-rm", cond("input.command", "contains", "rm")),
		allowRule("ls", cond("input.command", "eq", "ls")),
	}}}, FrozenAgents: []FrozenAgent{{ID: "frozen", Reason: "stop <now> & \"here\""}}})
	eval := func(cmd, agent string) Result {
		return c.Evaluate(Request{"tool_name": "Bash", "agent_id": agent, "input": map[string]any{"command": cmd}}, EvalOptions{})
	}
	for _, tc := range []struct {
		name string
		res  Result
		want map[string]any // expected keys; nil value means JSON null; absent keys listed in gone
		gone []string
	}{
		{name: "default allow", res: eval("pwd", "a"),
			want: map[string]any{"decision": "allow", "matchedPolicyId": nil, "matchedPolicyVersion": nil, "matchedRuleId": nil},
			gone: []string{"code", "trace"}},
		{name: "rule deny", res: eval("rm -rf", "a"),
			// A rule's deny is coded by the rule's id (StatedCode).
			want: map[string]any{"decision": "deny", "matchedPolicyId": "p", "matchedPolicyVersion": 3.0, "matchedRuleId": "no-rm", "code": "no-rm"}},
		{name: "rule allow", res: eval("ls", "a"),
			want: map[string]any{"decision": "allow", "matchedPolicyId": "p", "matchedPolicyVersion": 3.0, "matchedRuleId": "ls"},
			gone: []string{"code"}},
		{name: "frozen", res: eval("ls", "FROZEN"),
			want: map[string]any{"decision": "deny", "matchedRuleId": nil, "code": "AGENT_FROZEN", "reason": "stop <now> & \"here\""}},
		{name: "hand-built, hostile strings", res: Result{Decision: Deny, MatchedPolicyID: "p\"\n", MatchedRuleID: "r\u2028", Reason: "bad \xff utf8", LatencyMs: 0.125},
			want: map[string]any{"decision": "deny", "matchedPolicyId": "p\"\n", "matchedPolicyVersion": 0.0, "matchedRuleId": "r\u2028", "code": "r\u2028", "latencyMs": 0.125, "reason": "bad \ufffd utf8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc, err := json.Marshal(tc.res)
			if err != nil {
				t.Fatal(err)
			}
			appended, err := tc.res.AppendJSON([]byte("prefix"))
			if err != nil || string(appended) != "prefix"+string(doc) {
				t.Errorf("AppendJSON = %q, %v; want prefix+%s", appended, err, doc)
			}
			var m map[string]any
			if err := json.Unmarshal(doc, &m); err != nil {
				t.Fatalf("not JSON: %v: %s", err, doc)
			}
			for k, v := range tc.want {
				got, ok := m[k]
				if !ok || !reflect.DeepEqual(got, v) {
					t.Errorf("%s = %#v (present %v), want %#v in %s", k, got, ok, v, doc)
				}
			}
			for _, k := range tc.gone {
				if _, ok := m[k]; ok {
					t.Errorf("%s present in %s", k, doc)
				}
			}
			if _, ok := m["latencyMs"].(float64); !ok {
				t.Errorf("latencyMs missing or not a number in %s", doc)
			}
			var back Result
			if err := json.Unmarshal(doc, &back); err != nil {
				t.Fatal(err)
			}
			again, _ := json.Marshal(back)
			var m2 map[string]any
			if err := json.Unmarshal(again, &m2); err != nil || !reflect.DeepEqual(m, m2) {
				t.Errorf("round trip changed the document:\n%s\n%s", doc, again)
			}
			// What is read back is the result as stated: a rule's deny
			// comes back coded by the rule's id.
			stated := tc.res
			stated.Code = stated.StatedCode()
			if strings.ToValidUTF8(tc.res.Reason, "\ufffd") == tc.res.Reason && !reflect.DeepEqual(back, stated) {
				t.Errorf("round trip changed the result:\n%+v\n%+v", back, stated)
			}
		})
	}
}

func TestResultJSONRejectsMalformed(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{``, `[]`, `{"decision":5}`, `{"matchedPolicyVersion":"x"}`, `{"trace":{}}`, `{`} {
		var r Result
		if err := json.Unmarshal([]byte(doc), &r); err == nil {
			t.Errorf("%q decoded without error: %+v", doc, r)
		}
	}
}

// TestEvaluateConcurrently: one compiled bundle serves many goroutines; its
// per-evaluation caches must not leak one request's values into another's.
// The clock is stopped: on a loaded machine a real one can (rightly) time
// out.
func TestEvaluateConcurrently(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, Bundle{Policies: []Policy{{ID: "p", DefaultEffect: "allow", Rules: []Rule{
		denyRule("big", cond("kwargs.amount", "gt", 1000), cond("kwargs.amount", "contains", "5")),
		denyRule("rm", cond("input.command", "matches", `^rm\s`)),
	}}}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				amount := float64(g*1000 + i)
				cmd := "ls"
				if i%3 == 0 {
					cmd = "rm -rf /"
				}
				res := c.Evaluate(Request{"tool_name": "Bash", "kwargs": map[string]any{"amount": amount},
					"input": map[string]any{"command": cmd}}, EvalOptions{Now: fixedClock(t0), Explain: i%2 == 0})
				want := Allow
				if cmd != "ls" || (amount > 1000 && strings.Contains(Stringify(amount), "5")) {
					want = Deny
				}
				if res.Decision != want {
					t.Errorf("amount %v cmd %q: %s, want %s", amount, cmd, res.Decision, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
