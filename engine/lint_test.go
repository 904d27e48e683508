package engine

import (
	"strings"
	"testing"
)

func TestLint(t *testing.T) {
	t.Parallel()
	bash := Condition{Field: "tool_name", Operator: "eq", Value: raw("Bash")}
	rmrf := Condition{Field: "input.command", Operator: "contains", Value: raw("rm -rf")}
	tests := []struct {
		name  string
		rules []Rule
		want  []string // substrings, one per expected warning, in order
	}{
		{"clean", []Rule{
			{ID: "a", Effect: "deny", Conditions: []Condition{bash, rmrf}},
			{ID: "b", Effect: "allow", Conditions: []Condition{bash}},
		}, nil},
		{"unreachable after unconditional deny", []Rule{
			{ID: "stop", Effect: "deny"},
			{ID: "never", Effect: "allow", Conditions: []Condition{bash}},
			{ID: "never-either", Effect: "deny", Conditions: []Condition{rmrf}},
		}, []string{`rule "never" can never match: rule 0 ("stop")`, `rule "never-either" can never match`}},
		{"unanchored tool_name regex", []Rule{
			{ID: "gh", Effect: "deny", Conditions: []Condition{{Field: "tool_name", Operator: "matches", Value: raw("mcp__github__")}}},
			{ID: "anchored", Effect: "deny", Conditions: []Condition{{Field: "tool_name", Operator: "matches", Value: raw("^mcp__github__delete_.*$")}}},
			{ID: "prefix", Effect: "deny", Conditions: []Condition{{Field: "tool_name", Operator: "matches", Value: raw("^mcp__github__(create|delete)_")}}},
			{ID: "suffix", Effect: "deny", Conditions: []Condition{{Field: "tool_name", Operator: "matches", Value: raw("_delete$")}}},
			{ID: "other-field", Effect: "deny", Conditions: []Condition{{Field: "input.command", Operator: "matches", Value: raw("rm")}}},
		}, []string{`pattern "mcp__github__" on tool_name is not anchored`}},
		{"identical conditions, opposite effects, any order", []Rule{
			{ID: "no", Effect: "deny", Conditions: []Condition{bash, rmrf}},
			{ID: "yes", Effect: "allow", Conditions: []Condition{rmrf, bash}},
		}, []string{`rule "yes" has the same conditions as rule 0 ("no") with the opposite effect; rule "no" always wins`}},
		{"same effect is not a conflict", []Rule{
			{ID: "a", Effect: "deny", Conditions: []Condition{bash}},
			{ID: "b", Effect: "deny", Conditions: []Condition{bash}},
		}, nil},
		{"numbers compare by value", []Rule{
			{ID: "a", Effect: "allow", Conditions: []Condition{{Field: "kwargs.amount", Operator: "gt", Value: raw(1000)}}},
			{ID: "b", Effect: "deny", Conditions: []Condition{{Field: "kwargs.amount", Operator: "gt", Value: []byte("1000.0")}}},
		}, []string{`rule "b" always wins`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Lint(Policy{ID: "p", Rules: tt.rules})
			if len(got) != len(tt.want) {
				t.Fatalf("got %d warnings, want %d: %v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i].String(), w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i].String(), w)
				}
			}
		})
	}
}

func TestCheckFrozenAgentWhitespace(t *testing.T) {
	t.Parallel()
	for _, id := range []string{" agent", "agent\t", "\u00a0agent"} {
		if d := CheckFrozenAgent(FrozenAgent{ID: id}); len(d) != 1 || !strings.Contains(d[0].Message, "whitespace") {
			t.Errorf("%q: %v", id, d)
		}
	}
	if d := CheckFrozenAgent(FrozenAgent{ID: "agent one"}); len(d) != 0 {
		t.Errorf("inner spaces are fine: %v", d)
	}
}
