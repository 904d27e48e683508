package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine/detect"
)

// Explanations and scores of result evaluations (issue 28).

func TestResultExplanations(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("x", 1042) + awsKey + " tail"
	b := Bundle{Policies: []Policy{
		ordered("p",
			resultRule("json", "deny", cond("output.isError", "eq", false), Condition{Field: "output.text", Operator: "is_valid_json"}),
			resultRule("keys", "redact", cond("output.text", "matches", `AKIA[0-9A-Z]{16}`)),
			resultRule("rows", "warn", cond("output.text", "contains", "tail"), cond("output.isError", "eq", false),
				cond("output.structured.rows", "gt", 100), cond("output.structured.name", "eq", "x")),
			resultRule("none", "audit"),
			gwRule("other-agent", "deny", withPhase(PhaseResult), withAgents("someone-else")),
			resultRule("groups", "warn",
				Condition{Any: []Condition{cond("output.text", "starts_with", "y"), cond("output.text", "ends_with", "tail")}},
				Condition{Any: []Condition{cond("output.size", "lt", 10), {All: []Condition{cond("output.size", "gte", 10), cond("output.text", "contains", "nope")}}}}),
			resultRule("secret-literal", "warn", cond("output.text", "not_contains", awsKey)),
			denyRule("a-call-rule", cond("output.text", "contains", "x")),
		),
	}}
	c := mustCompile(t, b)
	req := resultRequest(t, text, `"isError":false`, `"structured":{"rows":100,"name":"x"}`, `"size":2000`)
	r := c.Evaluate(req, EvalOptions{Phase: PhaseResult, Now: fixedClock(t0)})
	if r.StatedEffect() != EffectRedact || r.MatchedRuleID != "keys" {
		t.Fatalf("decision: %+v", r)
	}
	want := []Explanation{
		{PolicyID: "p", RuleID: "json", Effect: EffectDeny, Passed: false, Score: 0.5, Condition: 2, Sentence: "condition 2: output.text is not valid JSON"},
		{PolicyID: "p", RuleID: "keys", Effect: EffectRedact, Passed: true, Score: 1, Condition: 1, Sentence: "condition 1: output.text matches pattern `AKIA[0-9A-Z]{16}` at byte 1042 (20 bytes)"},
		{PolicyID: "p", RuleID: "rows", Effect: EffectWarn, Passed: false, Score: 0.75, Condition: 3, Sentence: "condition 3: output.structured.rows is not greater than 100"},
		{PolicyID: "p", RuleID: "none", Effect: EffectAudit, Passed: true, Score: 1, Sentence: "the rule has no conditions: it holds whenever its filters do"},
		{PolicyID: "p", RuleID: "groups", Effect: EffectWarn, Passed: false, Score: 0.5, Condition: 2, Sentence: "condition 2: none of its 2 alternatives holds"},
		{PolicyID: "p", RuleID: "secret-literal", Effect: EffectWarn, Passed: false, Score: 0, Condition: 1,
			Sentence: "condition 1: output.text contains `" + awsKey + "` at byte 1042 (20 bytes)"},
	}
	if len(r.Explanations) != len(want) {
		t.Fatalf("explanations:\n%s\nwant %d", mustJSON(r.Explanations), len(want))
	}
	for i := range want {
		if r.Explanations[i] != want[i] {
			t.Errorf("explanation %d:\n got %+v\nwant %+v", i, r.Explanations[i], want[i])
		}
	}
	// A sentence repeats the policy's own operand (secret-literal's), never
	// what the output held: with the key only in the output, no sentence
	// names it.
	b.Policies[0].Rules = b.Policies[0].Rules[:6]
	r = mustCompile(t, b).Evaluate(req, EvalOptions{Phase: PhaseResult, Explain: true})
	doc, err := r.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range r.Explanations {
		if strings.Contains(x.Sentence, awsKey) || strings.Contains(x.Sentence, "xxxx") {
			t.Errorf("a sentence repeats the output: %q", x.Sentence)
		}
	}
	var back Result
	if err := json.Unmarshal(doc, &back); err != nil || len(back.Explanations) != 5 || back.Explanations[1] != want[1] || len(back.Redactions) != 1 || back.Output[OutputText] != strings.Repeat("x", 1042)+"[REDACTED:keys] tail" {
		t.Errorf("the result's JSON: %v\n%s", err, doc)
	}
	// The call evaluation has no explanations.
	if r := c.Evaluate(req, EvalOptions{Explain: true}); r.Explanations != nil {
		t.Errorf("a call evaluation explained: %+v", r.Explanations)
	}
}

func TestExplanationSentences(t *testing.T) {
	t.Parallel()
	req := resultRequest(t, `{"a":1} card 4111 1111 1111 1111 mail bob@example.com`, `"isError":true`, `"structured":{"rows":[1,2],"n":7}`)
	text := req[FieldOutput].(map[string]any)[OutputText].(string)
	detectWant := func(names ...string) string {
		sc, err := detect.New(names...)
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := sc.First(text); ok {
			return fmt.Sprintf("output.text contains %s %s at byte %d (%d bytes)", map[bool]string{true: "an", false: "a"}[strings.ContainsRune("aeiou", rune(m.Detector.String()[0]))], m.Detector, m.Start, m.End-m.Start)
		}
		return "output.text contains no " + strings.Join(names, ", ")
	}
	for _, tc := range []struct {
		c    Condition
		want string
	}{
		{Condition{Field: "output.text", Operator: "is_valid_json"}, "output.text is not valid JSON"},
		{cond("output.text", "starts_with", `{"a"`), "output.text starts with `{\"a\"`"},
		{cond("output.text", "ends_with", "x"), "output.text does not end with `x`"},
		{cond("output.text", "contains", "1111"), "output.text contains `1111` at byte 18 (4 bytes)"},
		{cond("output.text", "matches", `[0-9]{4} [0-9]{4}`), "output.text matches pattern `[0-9]{4} [0-9]{4}` at byte 13 (9 bytes)"},
		{cond("output.text", "matches", `^zzz`), "output.text does not match pattern `^zzz`"},
		{cond("output.isError", "eq", false), "output.isError does not equal false"},
		{cond("output.isError", "neq", false), "output.isError does not equal false"},
		{cond("output.structured.n", "lte", 5), "output.structured.n is greater than 5"},
		{cond("output.structured.n", "gte", 5), "output.structured.n is at least 5"},
		{cond("output.structured.n", "lt", 5), "output.structured.n is not less than 5"},
		{Condition{Field: "output.structured.rows.5", Operator: "exists"}, "output.structured.rows.5 is missing"},
		{Condition{Field: "output.structured.rows", Operator: "not_exists"}, "output.structured.rows is present"},
		{Condition{Field: "output.structured.rows", Operator: "is_empty"}, "output.structured.rows is not empty"},
		{cond("output.structured.gone", "gt", 1), "output.structured.gone is missing"},
		{Condition{Field: "output.structured.n", Operator: "in", Values: []json.RawMessage{raw(1), raw(7)}}, "output.structured.n is one of [1, 7]"},
		{Condition{Field: "output.structured.n", Operator: "not_in", Values: []json.RawMessage{raw(1), raw(2), raw(3), raw(4), raw(7)}}, "output.structured.n is one of the 5 listed values"},
		{cond("output.text", "detect", "credit_card"), detectWant("credit_card")},
		{Condition{Field: "output.text", Operator: "detect", Values: []json.RawMessage{raw("aws_access_key"), raw("jwt")}}, detectWant("aws_access_key", "jwt")},
	} {
		c := mustCompile(t, Bundle{Policies: []Policy{ordered("p", resultRule("r", "warn", tc.c))}})
		r := c.Evaluate(req, EvalOptions{Phase: PhaseResult})
		if len(r.Explanations) != 1 || r.Explanations[0].Sentence != "condition 1: "+tc.want {
			t.Errorf("%s %s: %+v, want %q", tc.c.Field, tc.c.Operator, r.Explanations, tc.want)
		}
	}
}
