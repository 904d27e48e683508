package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine/internal/regex"
)

// validPolicy has three rules so that a broken third rule shows its index
// and id in the diagnostic.
func validPolicy() Policy {
	return Policy{ID: "guard", Version: 3, DefaultEffect: "allow", Rules: []Rule{
		allowRule("r0", cond("tool_name", "eq", "Read")),
		denyRule("r1", cond("input.command", "contains", "rm -rf")),
		denyRule("r2", cond("input.command", "matches", `^sudo\s`), cond("kwargs.amount", "gt", 1000)),
	}}
}

// wantDiag is where a diagnostic must point, and a word its message must
// use.
type wantDiag struct {
	rule    int
	ruleID  string
	cond    int
	field   string
	message string
}

func cond0(field string, msg string) wantDiag {
	return wantDiag{rule: 2, ruleID: "r2", cond: 0, field: "spec.rules[2].conditions[0]." + field, message: msg}
}

func setCond0(c Condition) func(*Policy) {
	return func(p *Policy) { p.Rules[2].Conditions[0] = c }
}

func TestCompileDiagnostics(t *testing.T) {
	t.Parallel()
	vals := func(vs ...any) []json.RawMessage {
		out := []json.RawMessage{}
		for _, v := range vs {
			out = append(out, raw(v))
		}
		return out
	}
	long := strings.Repeat("a", regex.MaxLength+1)
	for _, tc := range []struct {
		name   string
		mutate func(*Policy)
		want   []wantDiag
	}{
		{"lookahead", setCond0(cond("input.command", "matches", "rm(?=x)")), []wantDiag{cond0("value", "(?=")}},
		{"lookbehind", setCond0(cond("input.command", "matches", "(?<!a)b")), []wantDiag{cond0("value", "(?<!")}},
		{"backreference", setCond0(cond("input.command", "matches", `(a)\1`)), []wantDiag{cond0("value", `\1`)}},
		{"unbalanced paren", setCond0(cond("input.command", "matches", "(")), []wantDiag{cond0("value", "(")}},
		{"bad class range", setCond0(cond("input.command", "matches", "[z-a]")), []wantDiag{cond0("value", "z-a")}},
		{"huge repetition", setCond0(cond("input.command", "matches", "((a{100}){100}){100}")), []wantDiag{cond0("value", "{100}")}},
		{"pattern too long", setCond0(cond("input.command", "matches", long)), []wantDiag{cond0("value", fmt.Sprint(regex.MaxLength))}},
		{"matches a number", setCond0(cond("input.command", "matches", 5)), []wantDiag{cond0("value", "string")}},
		{"unknown operator", setCond0(cond("input.command", "equals", "x")), []wantDiag{cond0("operator", "equals")}},
		{"empty operator", setCond0(cond("input.command", "", "x")), []wantDiag{cond0("operator", "operator")}},
		{"contains a number", setCond0(cond("input.command", "contains", 5)), []wantDiag{cond0("value", "string")}},
		{"starts_with a bool", setCond0(cond("input.command", "starts_with", true)), []wantDiag{cond0("value", "string")}},
		{"ends_with without value", setCond0(Condition{Field: "a", Operator: "ends_with"}), []wantDiag{cond0("value", "value")}},
		{"gt a string", setCond0(cond("kwargs.amount", "gt", "1000")), []wantDiag{cond0("value", "number")}},
		{"lte a bool", setCond0(cond("kwargs.amount", "lte", false)), []wantDiag{cond0("value", "number")}},
		{"gte without value", setCond0(Condition{Field: "a", Operator: "gte"}), []wantDiag{cond0("value", "value")}},
		{"in without values", setCond0(Condition{Field: "tool_name", Operator: "in"}), []wantDiag{cond0("values", "values")}},
		{"not_in with an empty list", setCond0(Condition{Field: "tool_name", Operator: "not_in", Values: vals()}), []wantDiag{cond0("values", "values")}},
		{"in with an object", setCond0(Condition{Field: "tool_name", Operator: "in", Values: vals("a", map[string]any{})}), []wantDiag{cond0("values[1]", "object")}},
		{"in with null", setCond0(Condition{Field: "tool_name", Operator: "in", Values: vals(nil)}), []wantDiag{cond0("values[0]", "null")}},
		{"in with a list value", setCond0(Condition{Field: "tool_name", Operator: "in", Value: raw([]string{"a"})}), []wantDiag{cond0("value", "array")}},
		{"value and values", setCond0(Condition{Field: "tool_name", Operator: "in", Value: raw("a"), Values: vals("b")}), []wantDiag{cond0("values", "both")}},
		{"eq with values", setCond0(Condition{Field: "tool_name", Operator: "eq", Values: vals("b")}), []wantDiag{cond0("values", "list")}},
		{"eq without value", setCond0(Condition{Field: "tool_name", Operator: "eq"}), []wantDiag{cond0("value", "value")}},
		{"eq null", setCond0(cond("tool_name", "eq", nil)), []wantDiag{cond0("value", "null")}},
		{"eq an object", setCond0(cond("tool_name", "eq", map[string]any{"a": 1})), []wantDiag{cond0("value", "object")}},
		{"value not JSON", setCond0(Condition{Field: "a", Operator: "eq", Value: json.RawMessage("{")}), []wantDiag{cond0("value", "JSON")}},
		{"exists with a value", setCond0(cond("input.command", "exists", true)), []wantDiag{cond0("value", "no value")}},
		{"is_empty with values", setCond0(Condition{Field: "a", Operator: "is_empty", Values: vals("x")}), []wantDiag{cond0("values", "list")}},
		{"empty path", setCond0(cond("", "eq", "x")), []wantDiag{cond0("field", "empty")}},
		{"empty segment", setCond0(cond("input..command", "eq", "x")), []wantDiag{cond0("field", "empty segment")}},
		{"leading dot", setCond0(cond(".input", "eq", "x")), []wantDiag{cond0("field", "empty segment")}},
		{"trailing dot", setCond0(cond("input.", "eq", "x")), []wantDiag{cond0("field", "empty segment")}},
		{"__proto__", setCond0(cond("input.__proto__.x", "eq", "x")), []wantDiag{cond0("field", "__proto__")}},
		{"constructor", setCond0(cond("constructor", "eq", "x")), []wantDiag{cond0("field", "constructor")}},
		{"prototype", setCond0(cond("a.prototype", "eq", "x")), []wantDiag{cond0("field", "prototype")}},
		{"17 segments", setCond0(cond(strings.Repeat("a.", 16)+"a", "eq", "x")), []wantDiag{cond0("field", "17")}},
		{"257 characters", setCond0(cond(strings.Repeat("x", 257), "eq", "x")), []wantDiag{cond0("field", "257")}},
		{"bad path and bad value", setCond0(cond("a..b", "gt", "x")), []wantDiag{cond0("field", "empty segment"), cond0("value", "number")}},
		{"second condition", func(p *Policy) { p.Rules[2].Conditions[1] = cond("kwargs.amount", "gt", "x") },
			[]wantDiag{{rule: 2, ruleID: "r2", cond: 1, field: "spec.rules[2].conditions[1].value", message: "number"}}},
		{"duplicate rule id", func(p *Policy) { p.Rules[2].ID = "r0" },
			[]wantDiag{{rule: 2, ruleID: "r0", cond: -1, field: "spec.rules[2].id", message: "duplicate"}}},
		{"upper-case rule id", func(p *Policy) { p.Rules[2].ID = "Block_RM" },
			[]wantDiag{{rule: 2, ruleID: "Block_RM", cond: -1, field: "spec.rules[2].id", message: "Block_RM"}}},
		{"rule id ending in a dash", func(p *Policy) { p.Rules[2].ID = "r2-" },
			[]wantDiag{{rule: 2, ruleID: "r2-", cond: -1, field: "spec.rules[2].id", message: "r2-"}}},
		{"rule id too long", func(p *Policy) { p.Rules[2].ID = strings.Repeat("r", 64) },
			[]wantDiag{{rule: 2, ruleID: strings.Repeat("r", 64), cond: -1, field: "spec.rules[2].id", message: "64"}}},
		{"no rule id", func(p *Policy) { p.Rules[2].ID = "" },
			[]wantDiag{{rule: 2, ruleID: "", cond: -1, field: "spec.rules[2].id", message: "id"}}},
		{"bad effect", func(p *Policy) { p.Rules[2].Effect = "block" },
			[]wantDiag{{rule: 2, ruleID: "r2", cond: -1, field: "spec.rules[2].effect", message: "block"}}},
		{"no effect", func(p *Policy) { p.Rules[2].Effect = "" },
			[]wantDiag{{rule: 2, ruleID: "r2", cond: -1, field: "spec.rules[2].effect", message: "allow, deny, warn, audit, ask or redact"}}},
		{"too many conditions", func(p *Policy) {
			for len(p.Rules[2].Conditions) <= MaxConditionsPerRule {
				p.Rules[2].Conditions = append(p.Rules[2].Conditions, cond("a", "eq", "b"))
			}
		}, []wantDiag{{rule: 2, ruleID: "r2", cond: -1, field: "spec.rules[2].conditions", message: "65"}}},
		{"too many values", setCond0(Condition{Field: "a", Operator: "in", Values: make([]json.RawMessage, MaxValuesPerList+1)}),
			[]wantDiag{cond0("values", fmt.Sprint(MaxValuesPerList+1))}},
		{"bad defaultEffect", func(p *Policy) { p.DefaultEffect = "reject" },
			[]wantDiag{{rule: -1, cond: -1, field: "spec.defaultEffect", message: "reject"}}},
		{"zero rules", func(p *Policy) { p.Rules = nil },
			[]wantDiag{{rule: -1, cond: -1, field: "spec.rules", message: "rule"}}},
		{"too many rules", func(p *Policy) {
			for i := len(p.Rules); i <= MaxRulesPerPolicy; i++ {
				p.Rules = append(p.Rules, allowRule(fmt.Sprintf("x%d", i)))
			}
		}, []wantDiag{{rule: -1, cond: -1, field: "spec.rules", message: "1001"}}},
		{"description too long", func(p *Policy) { p.Rules[2].Description = strings.Repeat("d", MaxDescriptionLength+1) },
			[]wantDiag{{rule: 2, ruleID: "r2", cond: -1, field: "spec.rules[2].description", message: fmt.Sprint(MaxDescriptionLength + 1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := validPolicy()
			tc.mutate(&p)
			c, diags := Compile(Bundle{Policies: []Policy{p}})
			if len(diags) != len(tc.want) {
				t.Errorf("%d diagnostics, want %d: %v", len(diags), len(tc.want), diags)
			}
			for i, w := range tc.want {
				if i >= len(diags) {
					break
				}
				d := diags[i]
				got := wantDiag{rule: d.RuleIndex, ruleID: d.RuleID, cond: d.ConditionIndex, field: d.Field, message: w.message}
				if got != w || d.PolicyID != "guard" {
					t.Errorf("diagnostic %+v, want %+v in policy guard", d, w)
				}
				if !strings.Contains(d.Message, w.message) {
					t.Errorf("message %q does not mention %q", d.Message, w.message)
				}
				checkDiagnosticString(t, d)
			}
			if again := CheckPolicy(p); !reflect.DeepEqual(again, diags) {
				t.Errorf("CheckPolicy disagrees with Compile:\n%v\n%v", again, diags)
			}
			// The policy still compiles, into one that denies: a request
			// its valid first rule would allow is refused.
			res := c.Evaluate(Request{"tool_name": "Read", "input": map[string]any{"command": "sudo ls"}}, EvalOptions{})
			checkResult(t, res, expect{decision: Deny, code: CodePolicyCompileError})
			if !strings.Contains(res.Reason, "guard") {
				t.Errorf("reason %q does not name the policy", res.Reason)
			}
		})
	}
}

// checkDiagnosticString: the printed form names policy, rule index and id,
// condition index, the field path and the reason.
func checkDiagnosticString(t *testing.T, d Diagnostic) {
	t.Helper()
	s := d.String()
	parts := []string{`"` + d.PolicyID + `"`, d.Field, d.Message}
	if d.RuleIndex >= 0 {
		parts = append(parts, fmt.Sprintf("rule %d", d.RuleIndex))
		if d.RuleID != "" {
			parts = append(parts, d.RuleID)
		}
	}
	if d.ConditionIndex >= 0 {
		parts = append(parts, fmt.Sprintf("condition %d", d.ConditionIndex))
	}
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not mention %q", s, p)
		}
	}
	if d.Error() != s {
		t.Errorf("Error() = %q, String() = %q", d.Error(), s)
	}
}

// TestCompileLimitsAreInclusive: what sits exactly on a limit compiles.
func TestCompileLimitsAreInclusive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(*Policy)
	}{
		{"16 segments", setCond0(cond(strings.Repeat("a.", 15)+"a", "eq", "x"))},
		{"256 characters", setCond0(cond(strings.Repeat("x", 256), "eq", "x"))},
		{"pattern at the length limit", setCond0(cond("a", "matches", strings.Repeat("a", regex.MaxLength)))},
		{"63-character rule id", func(p *Policy) { p.Rules[2].ID = strings.Repeat("r", 63) }},
		{"64 conditions", func(p *Policy) {
			for len(p.Rules[2].Conditions) < MaxConditionsPerRule {
				p.Rules[2].Conditions = append(p.Rules[2].Conditions, cond("a", "eq", "b"))
			}
		}},
		{"1000 rules", func(p *Policy) {
			for i := len(p.Rules); i < MaxRulesPerPolicy; i++ {
				p.Rules = append(p.Rules, allowRule(fmt.Sprintf("x%d", i)))
			}
		}},
		{"1024 values", setCond0(Condition{Field: "a", Operator: "in", Values: func() []json.RawMessage {
			out := make([]json.RawMessage, MaxValuesPerList)
			for i := range out {
				out[i] = raw(i)
			}
			return out
		}()})},
		{"no conditions", func(p *Policy) { p.Rules[2].Conditions = nil }},
		{"unset defaultEffect", func(p *Policy) { p.DefaultEffect = "" }},
		{"scalar value for in", setCond0(Condition{Field: "tool_name", Operator: "in", Value: raw(5)})},
		{"numeric and forbidden-looking segments", setCond0(cond("args.0.Constructor.proto.__proto", "eq", "x"))},
		{"re2 features", setCond0(cond("a", "matches", `(?i)^\p{Greek}+[[:digit:]]\Q*\E(?P<n>x)$`))},
		{"dash-and-digit rule id", func(p *Policy) { p.Rules[2].ID = "0-block-rm-9" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := validPolicy()
			tc.mutate(&p)
			if diags := CheckPolicy(p); len(diags) != 0 {
				t.Errorf("unexpected diagnostics: %v", diags)
			}
		})
	}
}

// TestCompileKeepsOtherPoliciesWorking: a broken low-priority policy does not
// change what a valid higher-priority policy denies, and its diagnostics
// name it, not its neighbours.
func TestCompileKeepsOtherPoliciesWorking(t *testing.T) {
	t.Parallel()
	broken := validPolicy()
	broken.ID, broken.Priority = "broken", -1
	broken.Rules[1].Conditions[0] = cond("input.command", "matches", "(")
	broken.Rules[2].Effect = "nope"
	good := validPolicy()
	c, diags := Compile(Bundle{Policies: []Policy{broken, good}})
	if len(diags) != 2 {
		t.Fatalf("%d diagnostics, want 2: %v", len(diags), diags)
	}
	for _, d := range diags {
		if d.PolicyID != "broken" {
			t.Errorf("diagnostic for %q: %v", d.PolicyID, d)
		}
	}
	res := c.Evaluate(Request{"tool_name": "Bash", "input": map[string]any{"command": "rm -rf /"}}, EvalOptions{})
	checkResult(t, res, expect{decision: Deny, policy: "guard", version: 3, rule: "r1"})
	res = c.Evaluate(Request{"tool_name": "Bash", "input": map[string]any{"command": "ls"}}, EvalOptions{})
	checkResult(t, res, expect{decision: Deny, code: CodePolicyCompileError})
}

// TestCompileNeverPanics feeds structurally odd bundles that JSON decoding
// can produce.
func TestCompileNeverPanics(t *testing.T) {
	t.Parallel()
	odd := []Bundle{
		{Policies: []Policy{{}}},
		{Policies: []Policy{{ID: "p", Rules: []Rule{{}}}}},
		{Policies: []Policy{{ID: "p", Rules: []Rule{{ID: "r", Effect: "deny", Conditions: []Condition{{}}}}}}},
		{Policies: []Policy{{ID: "p", Rules: []Rule{{ID: "r", Effect: "deny", Conditions: []Condition{
			{Field: "a", Operator: "in", Values: []json.RawMessage{nil, json.RawMessage(""), json.RawMessage("nul")}},
			{Field: "a", Operator: "matches", Value: json.RawMessage(`"\ud800"`)},
			{Field: "a", Operator: "matches", Value: json.RawMessage("\"\xff(\"")},
			{Field: "\xff.\x00", Operator: "eq", Value: json.RawMessage(`1e999`)},
			{Field: "tool_name", Operator: "eq", Value: json.RawMessage(`"\u0000"`)},
			{Field: "tool_name", Operator: "in", Value: json.RawMessage(`[`)},
		}}}}}},
		{FrozenAgents: []FrozenAgent{{}, {ID: "\xff"}}},
	}
	for i, b := range odd {
		c, _ := Compile(b)
		for _, req := range []Request{{}, {"tool_name": "Bash", "agent_id": "\xff", "a": []any{nil}}, nil} {
			res := c.Evaluate(req, EvalOptions{Explain: true})
			t.Run(fmt.Sprint(i), func(t *testing.T) { checkInvariants(t, res) })
		}
	}
}

// Length limits count characters, as the CRD schema's maxLength does: a
// multi-byte description within the limit in characters compiles.
func TestLengthLimitsCountCharacters(t *testing.T) {
	desc := func(n int) Policy {
		return Policy{ID: "p", Rules: []Rule{{ID: "r", Effect: "deny", Description: strings.Repeat("é", n)}}}
	}
	if d := CheckPolicy(desc(MaxDescriptionLength)); len(d) != 0 {
		t.Errorf("%d two-byte characters: %v", MaxDescriptionLength, d)
	}
	if d := CheckPolicy(desc(MaxDescriptionLength + 1)); len(d) != 1 || !strings.Contains(d[0].Message, "1025 characters") {
		t.Errorf("%d characters: %v", MaxDescriptionLength+1, d)
	}
}
