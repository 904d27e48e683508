package lint

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// TestLintArgumentSpellings: a tool whose arguments a policy reads only as
// kwargs (or only as args) is warned about, since a call passing them
// another way is not read; reading another spelling, or a deny that
// requires the one read, silences it.
func TestLintArgumentSpellings(t *testing.T) {
	t.Parallel()
	tool := func(name string) engine.Condition {
		return engine.Condition{Field: "tool_name", Operator: "eq", Value: raw(name)}
	}
	over := func(field string) engine.Condition {
		return engine.Condition{Field: field, Operator: "gt", Value: raw(1000)}
	}
	empty := func(field string) engine.Condition { return engine.Condition{Field: field, Operator: "is_empty"} }
	tests := []struct {
		name   string
		rules  []engine.Rule
		want   []string // substrings, one per expected warning, in order
		tiered bool
	}{
		{"kwargs only", []engine.Rule{
			{ID: "cap", Effect: "deny", Conditions: []engine.Condition{tool("pay"), over("kwargs.amount")}},
		}, []string{`rule 0 ("cap"), condition 1: spec.rules[0].conditions[1]: tool "pay"'s arguments are read only as kwargs (kwargs.amount): a call passing them as input or args is not read by this policy`}, false},
		{"args only, each tool of an in", []engine.Rule{
			{ID: "cap", Effect: "deny", Conditions: []engine.Condition{
				{Field: "tool_name", Operator: "in", Values: []json.RawMessage{raw("pay"), raw("refund")}}, over("args.0")}},
		}, []string{`tool "pay"'s arguments are read only as args (args.0)`, `tool "refund"'s arguments are read only as args`}, false},
		{"kwargs and args in two rules", []engine.Rule{
			{ID: "cap", Effect: "deny", Conditions: []engine.Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "cap-positional", Effect: "deny", Conditions: []engine.Condition{tool("pay"), over("args.0")}},
		}, nil, false},
		{"kwargs and input in one group", []engine.Rule{
			{ID: "cap", Effect: "deny", Conditions: []engine.Condition{tool("pay"),
				{Any: []engine.Condition{over("kwargs.amount"), over("input.amount")}}}},
		}, nil, false},
		{"a deny requiring kwargs.amount", []engine.Rule{
			{ID: "cap", Effect: "deny", Conditions: []engine.Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "no-amount", Effect: "deny", Conditions: []engine.Condition{tool("pay"), empty("kwargs.amount")}},
		}, nil, false},
		{"a scoped deny requires nothing", []engine.Rule{
			{ID: "cap", Effect: "deny", Conditions: []engine.Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "no-amount", Effect: "deny", Subjects: &engine.Subjects{Roles: []string{"bot"}}, Conditions: []engine.Condition{tool("pay"), empty("kwargs.amount")}},
		}, []string{`tool "pay"'s arguments are read only as kwargs`}, false},
		{"an allow requiring kwargs requires nothing", []engine.Rule{
			{ID: "cap", Effect: "deny", Conditions: []engine.Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "ok", Effect: "allow", Conditions: []engine.Condition{tool("pay"), empty("kwargs.amount")}},
		}, []string{`tool "pay"'s arguments are read only as kwargs`}, false},
		{"input only: MCP sends nothing else", []engine.Rule{
			{ID: "cap", Effect: "deny", Conditions: []engine.Condition{tool("pay"), over("input.amount")}},
		}, nil, false},
		{"a rule for every tool reads the other spelling", []engine.Rule{
			{ID: "cap", Effect: "deny", Conditions: []engine.Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "any-big", Effect: "deny", Conditions: []engine.Condition{over("args.0")}},
		}, nil, false},
		{"no tool named", []engine.Rule{
			{ID: "any-big", Effect: "deny", Conditions: []engine.Condition{over("kwargs.amount")}},
		}, nil, false},
		{"tiered: targets.tools names the tool", []engine.Rule{
			{ID: "cap", Effect: "deny", Targets: &engine.Targets{Tools: []string{"pay"}}, Conditions: []engine.Condition{over("kwargs.amount")}},
			{ID: "pay", Effect: "allow", Targets: &engine.Targets{Tools: []string{"pay"}}},
		}, []string{`tool "pay"'s arguments are read only as kwargs`}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := engine.Policy{ID: "p", Rules: tt.rules}
			if tt.tiered {
				p.Evaluation = engine.EvaluationTiered
			}
			if problems := engine.CheckPolicy(p); len(problems) > 0 {
				t.Fatalf("the policy does not compile: %v", problems)
			}
			got := Lint(p)
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
