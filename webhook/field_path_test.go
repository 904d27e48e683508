package webhook

import (
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// The field.Path built from a diagnostic's Location reads exactly as the
// engine's own Field text, for every kind of location the compiler reports.
func TestFieldPathOfEveryDiagnosticLocation(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	p := engine.Policy{ID: "p", DefaultEffect: "maybe", Rules: []engine.Rule{
		{ID: "Bad_ID", Effect: "block"},
		{ID: "r", Effect: "deny", Conditions: []engine.Condition{
			{Field: "a..b", Operator: "eq", Value: raw(`1`)},
			{Field: "x", Operator: "in", Values: []json.RawMessage{raw(`"ok"`), raw(`{}`)}},
			{Field: "x", Operator: "matches", Value: raw(`"("`)},
			{Field: "x", Operator: "nope"},
		}},
	}}
	diags := engine.CheckPolicy(p)
	if len(diags) < 6 {
		t.Fatalf("want diagnostics at the policy, rule and condition levels, got %v", diags)
	}
	seen := map[string]bool{}
	for _, d := range diags {
		got := fieldPath(d.Location).String()
		if got != d.Field {
			t.Errorf("field.Path %q, engine says %q (%s)", got, d.Field, d.Message)
		}
		seen[got] = true
	}
	for _, want := range []string{"spec.defaultEffect", "spec.rules[0].id", "spec.rules[0].effect",
		"spec.rules[1].conditions[0].field", "spec.rules[1].conditions[1].values[1]",
		"spec.rules[1].conditions[2].value", "spec.rules[1].conditions[3].operator"} {
		if !seen[want] {
			t.Errorf("no diagnostic at %s; got %v", want, seen)
		}
	}
}
