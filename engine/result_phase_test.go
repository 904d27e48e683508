package engine

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// Result rules (issue 28): which rules each phase runs, the effects and
// their tiers on a result, what a redact decision delivers, truncated
// outputs, and the output's validation.

func withPhase(p Phase) ruleOpt { return func(r *Rule) { r.Phase = p } }

func resultRule(id, effect string, conds ...Condition) Rule {
	return Rule{ID: id, Phase: PhaseResult, Effect: effect, Conditions: conds}
}

const awsKey = "AKIAZ7Q3XKDLR2M4WPNE"

// resultRequest is a call to read_file with what it returned.
func resultRequest(t *testing.T, text string, extra ...string) Request {
	t.Helper()
	out := `"text":` + string(raw(text))
	for _, e := range extra {
		out += "," + e
	}
	req, err := DecodeRequest([]byte(`{"tool_name":"read_file","agent_id":"a1","input":{"path":"/etc/x"},"output":{` + out + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func evalResult(c *Compiled, req Request) Result {
	return c.Evaluate(req, EvalOptions{Now: fixedClock(t0), Phase: PhaseResult})
}

func TestResultPhaseRunsOnlyItsRules(t *testing.T) {
	t.Parallel()
	secret := cond("output.text", "contains", "AKIA")
	for _, eval := range []string{"", EvaluationTiered} {
		t.Run("evaluation="+eval, func(t *testing.T) {
			t.Parallel()
			p := Policy{ID: "p", Version: 1, Evaluation: eval, DefaultEffect: "allow", Rules: []Rule{
				gwRule("call-deny", "deny", withConds(cond("input.path", "eq", "/etc/shadow"))),
				resultRule("withhold", "deny", secret),
				gwRule("call-allow", "allow"),
			}}
			c := mustCompile(t, Bundle{Policies: []Policy{p}})
			req := resultRequest(t, "key "+awsKey)
			// The call: the result rule does not run, though its condition
			// holds on this request.
			if r := c.Evaluate(req, EvalOptions{Now: fixedClock(t0)}); r.Decision != Allow || r.MatchedRuleID != "call-allow" || r.Explanations != nil {
				t.Errorf("call: %+v", r)
			}
			// The result: only the result rule runs.
			if r := evalResult(c, req); r.Decision != Deny || r.MatchedRuleID != "withhold" || r.StatedCode() != "withhold" {
				t.Errorf("result: %+v", r)
			}
			clean := resultRequest(t, "nothing here")
			if r := evalResult(c, clean); r.Decision != Allow || r.MatchedRuleID != "" || r.StatedEffect() != EffectAllow {
				t.Errorf("clean result: %+v", r)
			}
			shadow := gwRequest(t, `{"tool_name":"read_file","input":{"path":"/etc/shadow"},"output":{"text":"x"}}`)
			if r := evalResult(c, Request(shadow)); r.Decision != Allow {
				t.Errorf("the call deny rule ran on a result: %+v", r)
			}
		})
	}
}

func TestResultEvaluationWithoutResultRules(t *testing.T) {
	t.Parallel()
	// A tiered policy denies by default, and its call rule denies this
	// call: neither judges a result.
	b := Bundle{Policies: []Policy{tiered("t", gwRule("d", "deny"))}}
	c := mustCompile(t, b)
	if c.HasResultRules() {
		t.Error("HasResultRules without a result rule")
	}
	r := evalResult(c, resultRequest(t, awsKey))
	if r.Decision != Allow || r.StatedEffect() != EffectAllow || r.MatchedRuleID != "" || r.Code != "" {
		t.Errorf("result evaluation without result rules: %+v", r)
	}
	var none *Compiled
	if !none.HasResultRules() {
		t.Error("a nil bundle must say it has result rules (its every decision is a deny)")
	}
	if r := none.Evaluate(resultRequest(t, "x"), EvalOptions{Phase: PhaseResult}); r.Decision != Deny || r.Code != CodeNoPolicies {
		t.Errorf("nil bundle: %+v", r)
	}
	if r := mustCompile(t, Bundle{}).Evaluate(resultRequest(t, "x"), EvalOptions{Phase: PhaseResult}); r.Decision != Deny || r.Code != CodeNoPolicies {
		t.Errorf("empty bundle: %+v", r)
	}
	if r := c.Evaluate(resultRequest(t, "x"), EvalOptions{Phase: "after"}); r.Decision != Deny || r.Code != CodeUnknownPhase {
		t.Errorf("unknown phase: %+v", r)
	}
}

func TestHasResultRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		b    Bundle
		want bool
	}{
		{"call rules only", Bundle{Policies: []Policy{allowAll("a")}}, false},
		{"a result rule", Bundle{Policies: []Policy{allowAll("a"), ordered("r", resultRule("x", "deny"))}}, true},
		{"in an Audit policy", Bundle{Policies: []Policy{allowAll("a"), {ID: "s", Mode: ModeAudit, Rules: []Rule{resultRule("x", "deny")}}}}, true},
		{"a phase that does not compile", Bundle{Policies: []Policy{ordered("r", Rule{ID: "x", Phase: "later", Effect: "deny"})}}, true},
	} {
		c, _ := Compile(tc.b)
		if got := c.HasResultRules(); got != tc.want {
			t.Errorf("%s: HasResultRules = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestResultEffectTiers: deny > redact > warn > audit > allow on a
// result, in an ordered policy (the first deny decides, a redact decides
// unless a deny does), a tiered one, and across policies and levels.
func TestResultEffectTiers(t *testing.T) {
	t.Parallel()
	holds := cond("output.text", "contains", "AKIA")
	rule := func(id, effect string, opts ...ruleOpt) Rule {
		return gwRule(id, effect, append([]ruleOpt{withPhase(PhaseResult), withConds(holds)}, opts...)...)
	}
	cluster := func(p Policy) Policy { p.Kind = KindClusterPolicy; return p }
	for _, tc := range []struct {
		name     string
		policies []Policy
		decision Decision
		effect   Effect
		rule     string
	}{
		{"ordered: redact, then a later allow", []Policy{ordered("p", rule("r", "redact"), rule("a", "allow"))}, Allow, EffectRedact, "r"},
		{"ordered: allow, then redact", []Policy{ordered("p", rule("a", "allow"), rule("r", "redact"))}, Allow, EffectRedact, "r"},
		{"ordered: redact, then deny", []Policy{ordered("p", rule("r", "redact"), rule("d", "deny"))}, Deny, EffectDeny, "d"},
		{"ordered: warn, then audit", []Policy{ordered("p", rule("w", "warn"), rule("au", "audit"))}, Allow, EffectAudit, "au"},
		{"ordered: two redacts, the first decides", []Policy{ordered("p", rule("r1", "redact"), rule("r2", "redact"))}, Allow, EffectRedact, "r1"},
		{"tiered: redact over warn", []Policy{tiered("p", rule("w", "warn"), rule("r", "redact"), rule("a", "allow"))}, Allow, EffectRedact, "r"},
		{"tiered: deny over redact", []Policy{tiered("p", rule("r", "redact"), rule("d", "deny"))}, Deny, EffectDeny, "d"},
		{"tiered: a higher tier's allow", []Policy{tiered("p", rule("r", "redact"), rule("a", "allow", withPriority(5)))}, Allow, EffectAllow, "a"},
		{"tiered: no match is no implicit deny", []Policy{tiered("p", gwRule("x", "deny", withPhase(PhaseResult), withConds(cond("output.isError", "eq", true))))}, Allow, EffectAllow, ""},
		{"policies: a redact then a later policy's allow", []Policy{{ID: "a", Priority: 2, Rules: []Rule{rule("r", "redact")}}, {ID: "b", Priority: 1, Rules: []Rule{rule("a", "allow")}}}, Allow, EffectRedact, "r"},
		{"policies: a later policy's deny", []Policy{{ID: "a", Priority: 2, Rules: []Rule{rule("r", "redact")}}, {ID: "b", Priority: 1, Rules: []Rule{rule("d", "deny")}}}, Deny, EffectDeny, "d"},
		{"levels: the cluster's redact over the namespace's warn", []Policy{cluster(ordered("c", rule("r", "redact"))), ordered("n", rule("w", "warn"))}, Allow, EffectRedact, "r"},
		{"levels: the namespace's deny over the cluster's redact", []Policy{cluster(ordered("c", rule("r", "redact"))), ordered("n", rule("d", "deny"))}, Deny, EffectDeny, "d"},
		{"tiered default deny does not judge results", []Policy{tiered("p", rule("w", "warn", withConds(cond("output.isError", "eq", true))))}, Allow, EffectAllow, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := mustCompile(t, Bundle{Policies: tc.policies})
			for _, explain := range []bool{false, true} {
				r := c.Evaluate(resultRequest(t, "x "+awsKey), EvalOptions{Now: fixedClock(t0), Phase: PhaseResult, Explain: explain})
				if r.Decision != tc.decision || r.StatedEffect() != tc.effect || r.MatchedRuleID != tc.rule {
					t.Errorf("explain=%v: got %s/%s by %q, want %s/%s by %q", explain, r.Decision, r.StatedEffect(), r.MatchedRuleID, tc.decision, tc.effect, tc.rule)
				}
				if (r.StatedEffect() == EffectRedact) != (r.Output != nil) {
					t.Errorf("explain=%v: output %v with effect %s", explain, r.Output, r.StatedEffect())
				}
				checkInvariants(t, r)
			}
		})
	}
}

func TestFreezeStopsResults(t *testing.T) {
	t.Parallel()
	b := Bundle{Policies: []Policy{ordered("p", resultRule("r", "allow"))}, FrozenAgents: []FrozenAgent{{ID: "a1"}}}
	c := mustCompile(t, b)
	if r := evalResult(c, resultRequest(t, "x")); r.Decision != Deny || r.Code != CodeAgentFrozen {
		t.Errorf("a frozen agent's result: %+v", r)
	}
	c = mustCompile(t, Bundle{Policies: []Policy{ordered("p", resultRule("r", "allow"))}})
	if r := c.Evaluate(resultRequest(t, "x"), EvalOptions{Phase: PhaseResult, ServiceAccount: "sa"}); r.Decision != Allow {
		t.Fatalf("unfrozen: %+v", r)
	}
	c = c.WithFrozen([]FrozenAgent{{ServiceAccount: "sa"}})
	if r := c.Evaluate(resultRequest(t, "x"), EvalOptions{Phase: PhaseResult, ServiceAccount: "sa"}); r.Decision != Deny || r.Code != CodeAgentFrozen {
		t.Errorf("a frozen service account's result: %+v", r)
	}
	if !c.HasResultRules() {
		t.Error("WithFrozen lost the result rules")
	}
}

func TestRedactSpans(t *testing.T) {
	t.Parallel()
	text := "id=" + awsKey + " mail bob@example.com; again " + awsKey + " ünï AKIA"
	keyAt := strings.Index(text, awsKey)
	key2 := strings.LastIndex(text, awsKey)
	for _, tc := range []struct {
		name  string
		rules []Rule
		text  string
		want  []Redaction // PolicyID p
		out   string
	}{
		{"every match of a pattern", []Rule{resultRule("aws", "redact", cond("output.text", "matches", `AKIA[0-9A-Z]{16}`))}, text,
			[]Redaction{{Start: keyAt, End: keyAt + 20, RuleID: "aws"}, {Start: key2, End: key2 + 20, RuleID: "aws"}},
			"id=[REDACTED:aws] mail bob@example.com; again [REDACTED:aws] ünï AKIA"},
		{"every occurrence of contains", []Rule{resultRule("ak", "redact", cond("output.text", "contains", "AKIA"))}, "AKIAAKIA-AKIA",
			[]Redaction{{Start: 0, End: 4, RuleID: "ak"}, {Start: 4, End: 8, RuleID: "ak"}, {Start: 9, End: 13, RuleID: "ak"}},
			"[REDACTED:ak][REDACTED:ak]-[REDACTED:ak]"},
		{"overlapping spans of two rules merge, the earlier keeps its id", []Rule{
			resultRule("a", "redact", cond("output.text", "contains", "bob@example")),
			resultRule("b", "redact", cond("output.text", "matches", `example\.com`)),
		}, text, []Redaction{{Start: strings.Index(text, "bob"), End: strings.Index(text, ";"), RuleID: "a"}},
			"id=" + awsKey + " mail [REDACTED:a]; again " + awsKey + " ünï AKIA"},
		{"unicode", []Rule{resultRule("u", "redact", cond("output.text", "matches", `ü.ï`))}, text,
			[]Redaction{{Start: strings.Index(text, "ü"), End: strings.Index(text, "ï") + len("ï"), RuleID: "u"}},
			"id=" + awsKey + " mail bob@example.com; again " + awsKey + " [REDACTED:u] AKIA"},
		{"adjacent spans stay apart", []Rule{
			resultRule("x", "redact", cond("output.text", "contains", "ab")),
			resultRule("y", "redact", cond("output.text", "contains", "cd")),
		}, "abcd", []Redaction{{Start: 0, End: 2, RuleID: "x"}, {Start: 2, End: 4, RuleID: "y"}}, "[REDACTED:x][REDACTED:y]"},
		{"a later span inside an earlier one", []Rule{
			resultRule("y", "redact", cond("output.text", "contains", "c")),
			resultRule("x", "redact", cond("output.text", "contains", "abcd")),
		}, "abcde", []Redaction{{Start: 0, End: 4, RuleID: "x"}}, "[REDACTED:x]e"},
		{"groups: the members that held, at any depth", []Rule{resultRule("g", "redact",
			Condition{Any: []Condition{
				cond("output.text", "contains", "nope"),
				{All: []Condition{cond("output.text", "contains", "bob"), cond("output.text", "matches", `[0-9]+`), cond("input.path", "starts_with", "/etc")}},
			}})}, "bob 42 x 7", []Redaction{{Start: 0, End: 3, RuleID: "g"}, {Start: 4, End: 6, RuleID: "g"}, {Start: 9, End: 10, RuleID: "g"}},
			"[REDACTED:g] [REDACTED:g] x [REDACTED:g]"},
		{"a matched redact rule whose tests read other fields leaves the text", []Rule{resultRule("p", "redact", cond("input.path", "eq", "/etc/x"))}, "secret", nil, "secret"},
		{"a rule that did not match contributes nothing", []Rule{
			resultRule("m", "redact", cond("output.text", "contains", "se")),
			resultRule("n", "redact", cond("output.text", "contains", "cr"), cond("output.isError", "eq", true)),
		}, "secret", []Redaction{{Start: 0, End: 2, RuleID: "m"}}, "[REDACTED:m]cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := mustCompile(t, Bundle{Policies: []Policy{ordered("p", tc.rules...)}})
			req := resultRequest(t, tc.text, `"isError":false`)
			r := evalResult(c, req)
			if r.StatedEffect() != EffectRedact || r.Decision != Allow {
				t.Fatalf("not a redact: %+v", r)
			}
			for i := range tc.want {
				tc.want[i].PolicyID = "p"
			}
			if !slices.Equal(r.Redactions, tc.want) {
				t.Errorf("redactions %+v, want %+v", r.Redactions, tc.want)
			}
			if r.Output[OutputText] != tc.out || r.Output[OutputIsError] != false {
				t.Errorf("output %q, want %q", r.Output, tc.out)
			}
			if got := ApplyRedactions(tc.text, r.Redactions); got != tc.out {
				t.Errorf("ApplyRedactions = %q, want %q", got, tc.out)
			}
			if req[FieldOutput].(map[string]any)[OutputText] != tc.text {
				t.Error("the request's output was modified")
			}
		})
	}
}

func TestRedactExemptedRule(t *testing.T) {
	t.Parallel()
	b := Bundle{Policies: []Policy{ordered("p",
		resultRule("keys", "redact", cond("output.text", "matches", `AKIA[0-9A-Z]{16}`)),
		resultRule("mail", "redact", cond("output.text", "contains", "bob@")))},
		Exceptions: []Exception{{Name: "ops", Policy: "p", RuleIDs: []string{"keys"}, AgentIDs: []string{"a1"}, ExpiresAt: t0.Add(time.Hour)}}}
	c := mustCompile(t, b)
	r := evalResult(c, resultRequest(t, awsKey+" bob@x"))
	want := []Redaction{{Start: 21, End: 25, PolicyID: "p", RuleID: "mail"}}
	if r.MatchedRuleID != "mail" || !slices.Equal(r.Redactions, want) {
		t.Errorf("exempted rule redacted: %+v", r)
	}
}

// TestOutputTruncated: every test of output.text or output.structured
// holds (those that need the whole text decide as if they matched), without
// spans; tests of other fields read what is there.
func TestOutputTruncated(t *testing.T) {
	t.Parallel()
	b := Bundle{Policies: []Policy{ordered("p",
		resultRule("no-json", "deny", cond("output.text", "is_valid_json", nil)),
		resultRule("rows", "deny", cond("output.structured.rows", "gt", 100)),
		resultRule("err", "deny", cond("output.isError", "eq", true)),
		resultRule("keys", "redact", cond("output.text", "not_contains", "AKIA"), Condition{Any: []Condition{cond("output.text", "matches", "x"), cond("input.path", "eq", "nope")}}),
	)}}
	b.Policies[0].Rules[0].Conditions[0].Value = nil
	c := mustCompile(t, b)
	req := resultRequest(t, "plain x")
	if r := evalResult(c, req); r.Decision != Allow || r.StatedEffect() != EffectRedact || r.MatchedRuleID != "keys" {
		t.Fatalf("whole output: %+v", r)
	}
	r := c.Evaluate(req, EvalOptions{Phase: PhaseResult, OutputTruncated: true})
	if r.Decision != Deny || r.MatchedRuleID != "no-json" {
		t.Errorf("truncated: %+v", r)
	}
	// Without the deny rules: the redact decides, with no spans and no
	// output (the caller could not hold what it would redact).
	b.Policies[0].Rules = b.Policies[0].Rules[2:]
	c = mustCompile(t, b)
	r = c.Evaluate(req, EvalOptions{Phase: PhaseResult, OutputTruncated: true, Explain: true})
	if r.StatedEffect() != EffectRedact || r.Redactions != nil || r.Output != nil {
		t.Errorf("truncated redact: %+v", r)
	}
	for _, x := range r.Explanations {
		if x.RuleID == "keys" && (!x.Passed || !strings.Contains(x.Sentence, "truncated")) {
			t.Errorf("explanation of a truncated output: %+v", x)
		}
		if x.RuleID == "err" && x.Passed {
			t.Errorf("output.isError is read even when the text was truncated: %+v", x)
		}
	}
	// A call rule on output.text is not a result rule: truncation does not
	// reach it.
	c = mustCompile(t, Bundle{Policies: []Policy{ordered("p", denyRule("c", cond("output.text", "contains", "zzz")))}})
	if r := c.Evaluate(req, EvalOptions{OutputTruncated: true}); r.Decision != Allow {
		t.Errorf("a call rule held on a truncated output: %+v", r)
	}
}

func TestCallRulesUnaffectedByOutput(t *testing.T) {
	t.Parallel()
	b := Bundle{Policies: []Policy{ordered("p",
		denyRule("rm", cond("input.path", "eq", "/etc/x")),
		resultRule("r", "redact", cond("output.text", "contains", "x")))}}
	c := mustCompile(t, b)
	without := gwRequest(t, `{"tool_name":"read_file","input":{"path":"/etc/x"}}`)
	with := resultRequest(t, "x")
	a, z := c.Evaluate(Request(without), EvalOptions{Now: fixedClock(t0)}), c.Evaluate(with, EvalOptions{Now: fixedClock(t0)})
	a.LatencyMs, z.LatencyMs = 0, 0
	if a.Decision != Deny || a.MatchedRuleID != "rm" || z.Decision != a.Decision || z.MatchedRuleID != a.MatchedRuleID || z.Redactions != nil || z.Explanations != nil || z.Output != nil {
		t.Errorf("the output changed a call's decision: %+v vs %+v", a, z)
	}
}

func TestOutputValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		output, want string
	}{
		{`"text"`, "output must be an object"},
		{`[1]`, "output must be an object"},
		{`null`, "output must be an object"},
		{`{"text":5}`, "output.text must be a string, not a number"},
		{`{"text":null}`, "output.text must be a string, not null"},
		{`{"isError":"yes"}`, "output.isError must be a boolean, not a string"},
		{`{"size":-1}`, "output.size must be a non-negative integer (bytes), not -1"},
		{`{"size":1.5}`, "output.size must be a non-negative integer (bytes), not 1.5"},
		{`{"size":"10"}`, "output.size must be a non-negative integer (bytes), not a string"},
		{`{"txt":"x"}`, `unknown output field "txt" (want text, structured, isError or size)`},
		{`{"text":"x","Structured":{}}`, `unknown output field "Structured"`},
	} {
		_, err := DecodeRequest([]byte(`{"tool_name":"t","output":` + tc.output + `}`))
		if err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("output %s: error %v, want %q", tc.output, err, tc.want)
		}
	}
	for _, ok := range []string{`{}`, `{"text":""}`, `{"text":"x","structured":{"rows":[1]},"isError":false,"size":0}`, `{"structured":null}`, `{"size":1048576}`} {
		if _, err := DecodeRequest([]byte(`{"tool_name":"t","output":` + ok + `}`)); err != nil {
			t.Errorf("output %s: %v", ok, err)
		}
	}
	if _, err := DecodeRequest([]byte(`{"tool_name":"t","Output":{}}`)); err == nil || !strings.Contains(err.Error(), `did you mean "output"`) {
		t.Errorf("Output: %v", err)
	}
}

func TestResultRuleDiagnostics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rule  Rule
		field string
		msg   string
	}{
		{"redact on a call rule", Rule{ID: "r", Effect: "redact"}, "spec.rules[0].effect", "effect redact is only for result rules (phase: result)"},
		{"redact on an explicit call rule", Rule{ID: "r", Phase: PhaseCall, Effect: "redact"}, "spec.rules[0].effect", "effect redact is only for result rules"},
		{"ask on a result rule", Rule{ID: "r", Phase: PhaseResult, Effect: "ask"}, "spec.rules[0].effect", "effect ask is only for call rules"},
		{"rateLimit on a result rule", Rule{ID: "r", Phase: PhaseResult, Effect: "deny", When: &When{RateLimit: &Limit{Max: 1, Window: "1m"}}}, "spec.rules[0].when.rateLimit", "rateLimit is only for call rules"},
		{"tokenBudget on a result rule", Rule{ID: "r", Phase: PhaseResult, Effect: "deny", When: &When{TokenBudget: &Limit{Max: 1, Window: "1m"}}}, "spec.rules[0].when.tokenBudget", "tokenBudget is only for call rules"},
		{"unknown phase", Rule{ID: "r", Phase: "Result", Effect: "deny"}, "spec.rules[0].phase", `must be call or result, not "Result"`},
		{"detect without a detector", Rule{ID: "r", Effect: "deny", Conditions: []Condition{{Field: "input", Operator: "detect"}}}, "spec.rules[0].conditions[0].value", "operator detect needs a detector name (value) or a list of them (values): one of aws_access_key, private_key"},
		{"detect with an unknown detector", Rule{ID: "r", Effect: "deny", Conditions: []Condition{cond("input", "detect", "aws_key")}}, "spec.rules[0].conditions[0].value", `unknown detector "aws_key": the detectors are aws_access_key, private_key, jwt, github_token, slack_token, generic_api_key, credit_card, email, iban, us_ssn`},
		{"detect with a number", Rule{ID: "r", Effect: "deny", Conditions: []Condition{cond("input", "detect", 5)}}, "spec.rules[0].conditions[0].value", "operator detect takes detector names (strings), not 5"},
		{"detect with a list holding an unknown one", Rule{ID: "r", Effect: "deny", Conditions: []Condition{{Field: "input", Operator: "detect", Values: []json.RawMessage{raw("jwt"), raw("ssn")}}}}, "spec.rules[0].conditions[0].values[1]", `unknown detector "ssn"`},
		{"detect naming a detector twice", Rule{ID: "r", Effect: "deny", Conditions: []Condition{{Field: "input", Operator: "detect", Values: []json.RawMessage{raw("jwt"), raw("email"), raw("jwt")}}}}, "spec.rules[0].conditions[0].values[2]", `detector "jwt" is named twice`},
		{"detect with an empty list", Rule{ID: "r", Effect: "deny", Conditions: []Condition{{Field: "input", Operator: "detect", Values: []json.RawMessage{}}}}, "spec.rules[0].conditions[0].value", "operator detect needs a detector name"},
		{"detect with value and values", Rule{ID: "r", Effect: "deny", Conditions: []Condition{{Field: "input", Operator: "detect", Value: raw("jwt"), Values: []json.RawMessage{raw("jwt")}}}}, "spec.rules[0].conditions[0].values", "set value or values, not both"},
		{"detect with an object", Rule{ID: "r", Effect: "deny", Conditions: []Condition{{Field: "input", Operator: "detect", Value: json.RawMessage(`{"a":1}`)}}}, "spec.rules[0].conditions[0].value", "operator detect takes detector names (strings)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			diags := CheckPolicy(Policy{ID: "p", Rules: []Rule{tc.rule}})
			if len(diags) != 1 || diags[0].Field != tc.field || !strings.Contains(diags[0].Message, tc.msg) {
				t.Fatalf("diagnostics %v, want one at %s saying %q", diags, tc.field, tc.msg)
			}
			checkDiagnosticString(t, diags[0])
			c, _ := Compile(Bundle{Policies: []Policy{{ID: "p", Rules: []Rule{tc.rule}}}})
			phases := []Phase{PhaseCall}
			if isResultRule(&tc.rule) {
				phases = append(phases, PhaseResult) // else the bundle has no result rule: results go on
			}
			for _, phase := range phases {
				if r := c.Evaluate(resultRequest(t, "x"), EvalOptions{Phase: phase}); r.Decision != Deny || r.Code != CodePolicyCompileError {
					t.Errorf("phase %s: a policy that does not compile decided %+v", phase, r)
				}
			}
		})
	}
	for _, ok := range []Rule{
		{ID: "a", Phase: PhaseResult, Effect: "redact", Conditions: []Condition{cond("output.text", "detect", "aws_access_key")}},
		{ID: "b", Phase: PhaseCall, Effect: "deny", Conditions: []Condition{{Field: "input.content", Operator: "detect", Values: []json.RawMessage{raw("jwt"), raw("email")}}}},
		{ID: "c", Phase: PhaseResult, Effect: "warn", When: &When{Environments: []string{"prod"}}},
	} {
		if diags := CheckPolicy(Policy{ID: "p", Rules: []Rule{ok}}); len(diags) > 0 {
			t.Errorf("rule %s: %v", ok.ID, diags)
		}
	}
}

func TestSchemaVersionResults(t *testing.T) {
	t.Parallel()
	plain := Bundle{Policies: []Policy{ordered("p", denyRule("d", cond("input.path", "eq", "x")))}}
	doc, _, err := Encode(plain)
	if err != nil || plain.NeededSchemaVersion() != SchemaVersionOrdered || strings.Contains(string(doc), "phase") {
		t.Fatalf("a bundle without result rules: version %d, %s, %v", plain.NeededSchemaVersion(), doc, err)
	}
	for name, r := range map[string]Rule{
		"result rule":   resultRule("r", "deny"),
		"detect":        denyRule("d", cond("input.body", "detect", "jwt")),
		"nested detect": denyRule("d", Condition{Any: []Condition{{All: []Condition{cond("input.body", "detect", "jwt")}}}}),
	} {
		b := Bundle{Policies: []Policy{ordered("p", r)}}
		if v := b.NeededSchemaVersion(); v != SchemaVersionResults {
			t.Errorf("%s: version %d, want %d", name, v, SchemaVersionResults)
		}
		doc, _, err := Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(doc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
