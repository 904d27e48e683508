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

// The same holds for the gateway fields' locations: nested condition
// groups, filters, lists inside them and their items.
func TestFieldPathOfGatewayDiagnostics(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	p := engine.Policy{ID: "p", Rules: []engine.Rule{
		{ID: "r", Effect: "allow", Priority: 3,
			Subjects: &engine.Subjects{Agents: []string{}},
			Targets:  &engine.Targets{Resources: []engine.ResourceTarget{{Type: "", Names: []string{"a"}}}},
			Select:   &engine.Select{Tool: "/(?=x)/"},
			When: &engine.When{Schedule: []engine.Window{{Days: []string{"mon", "Tue"}, From: "8:00", To: "09:00", TimeZone: "Nowhere/Land"}},
				RateLimit: &engine.Limit{Max: 0, Window: "0s", Per: "pod"}},
			Conditions: []engine.Condition{{Any: []engine.Condition{
				{Field: "a", Operator: "exists"},
				{All: []engine.Condition{{Field: "x", Operator: "gt", Value: raw(`"x"`)}}},
			}}}},
	}}
	diags := engine.CheckPolicy(p)
	seen := map[string]bool{}
	for _, d := range diags {
		got := fieldPath(d.Location).String()
		if got != d.Field {
			t.Errorf("field.Path %q, engine says %q (%s)", got, d.Field, d.Message)
		}
		seen[got] = true
	}
	for _, want := range []string{"spec.rules[0].priority", "spec.rules[0].subjects.agents",
		"spec.rules[0].targets.resources[0].type", "spec.rules[0].select.tool",
		"spec.rules[0].when.schedule[0].days[1]", "spec.rules[0].when.schedule[0].from",
		"spec.rules[0].when.schedule[0].timeZone", "spec.rules[0].when.rateLimit.max",
		"spec.rules[0].when.rateLimit.window", "spec.rules[0].when.rateLimit.per",
		"spec.rules[0].conditions[0].any[1].all[0].value"} {
		if !seen[want] {
			t.Errorf("no diagnostic at %s; got %v", want, seen)
		}
	}
}
