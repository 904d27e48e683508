package lint

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

func TestResultRuleThatReadsNoOutputWarns(t *testing.T) {
	t.Parallel()
	test := func(field string) engine.Condition {
		return engine.Condition{Field: field, Operator: "exists"}
	}
	p := engine.Policy{ID: "p", Rules: []engine.Rule{
		{ID: "blind", Phase: engine.PhaseResult, Effect: "deny", Conditions: []engine.Condition{test("input.path")}},
		{ID: "none", Phase: engine.PhaseResult, Effect: "warn"},
		{ID: "reads", Phase: engine.PhaseResult, Effect: "deny", Conditions: []engine.Condition{test("output.text")}},
		{ID: "nested", Phase: engine.PhaseResult, Effect: "deny", Conditions: []engine.Condition{{Any: []engine.Condition{test("input.x"), {All: []engine.Condition{test("output.size")}}}}}},
		{ID: "whole", Phase: engine.PhaseResult, Effect: "deny", Conditions: []engine.Condition{test("output")}},
		{ID: "call", Effect: "deny", Conditions: []engine.Condition{test("input.path")}},
		// A result deny of everything does not block the call rules after it.
		{ID: "after", Effect: "allow", Conditions: []engine.Condition{test("input.other")}},
	}}
	problems, warnings := Review(p)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	var got []string
	for _, w := range warnings {
		got = append(got, w.RuleID+"@"+w.Field)
		if w.RuleID == "blind" && !strings.Contains(w.Message, `result rule "blind" reads no output field`) {
			t.Errorf("message: %s", w.Message)
		}
	}
	if want := "blind@spec.rules[0].conditions none@spec.rules[1].conditions"; strings.Join(got, " ") != want {
		t.Errorf("warnings %v, want %s", got, want)
	}
}
