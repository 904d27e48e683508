package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLintArgumentSpellings: a tool whose arguments a policy reads only as
// kwargs (or only as args) is warned about, since a call passing them
// another way is not read; reading another spelling, or a deny that
// requires the one read, silences it.
func TestLintArgumentSpellings(t *testing.T) {
	t.Parallel()
	tool := func(name string) Condition { return Condition{Field: "tool_name", Operator: "eq", Value: raw(name)} }
	over := func(field string) Condition { return Condition{Field: field, Operator: "gt", Value: raw(1000)} }
	empty := func(field string) Condition { return Condition{Field: field, Operator: "is_empty"} }
	tests := []struct {
		name   string
		rules  []Rule
		want   []string // substrings, one per expected warning, in order
		tiered bool
	}{
		{"kwargs only", []Rule{
			{ID: "cap", Effect: "deny", Conditions: []Condition{tool("pay"), over("kwargs.amount")}},
		}, []string{`rule 0 ("cap"), condition 1: spec.rules[0].conditions[1]: tool "pay"'s arguments are read only as kwargs (kwargs.amount): a call passing them as input or args is not read by this policy`}, false},
		{"args only, each tool of an in", []Rule{
			{ID: "cap", Effect: "deny", Conditions: []Condition{
				{Field: "tool_name", Operator: "in", Values: []json.RawMessage{raw("pay"), raw("refund")}}, over("args.0")}},
		}, []string{`tool "pay"'s arguments are read only as args (args.0)`, `tool "refund"'s arguments are read only as args`}, false},
		{"kwargs and args in two rules", []Rule{
			{ID: "cap", Effect: "deny", Conditions: []Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "cap-positional", Effect: "deny", Conditions: []Condition{tool("pay"), over("args.0")}},
		}, nil, false},
		{"kwargs and input in one group", []Rule{
			{ID: "cap", Effect: "deny", Conditions: []Condition{tool("pay"),
				{Any: []Condition{over("kwargs.amount"), over("input.amount")}}}},
		}, nil, false},
		{"a deny requiring kwargs.amount", []Rule{
			{ID: "cap", Effect: "deny", Conditions: []Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "no-amount", Effect: "deny", Conditions: []Condition{tool("pay"), empty("kwargs.amount")}},
		}, nil, false},
		{"a scoped deny requires nothing", []Rule{
			{ID: "cap", Effect: "deny", Conditions: []Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "no-amount", Effect: "deny", Subjects: &Subjects{Roles: []string{"bot"}}, Conditions: []Condition{tool("pay"), empty("kwargs.amount")}},
		}, []string{`tool "pay"'s arguments are read only as kwargs`}, false},
		{"an allow requiring kwargs requires nothing", []Rule{
			{ID: "cap", Effect: "deny", Conditions: []Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "ok", Effect: "allow", Conditions: []Condition{tool("pay"), empty("kwargs.amount")}},
		}, []string{`tool "pay"'s arguments are read only as kwargs`}, false},
		{"input only: MCP sends nothing else", []Rule{
			{ID: "cap", Effect: "deny", Conditions: []Condition{tool("pay"), over("input.amount")}},
		}, nil, false},
		{"a rule for every tool reads the other spelling", []Rule{
			{ID: "cap", Effect: "deny", Conditions: []Condition{tool("pay"), over("kwargs.amount")}},
			{ID: "any-big", Effect: "deny", Conditions: []Condition{over("args.0")}},
		}, nil, false},
		{"no tool named", []Rule{
			{ID: "any-big", Effect: "deny", Conditions: []Condition{over("kwargs.amount")}},
		}, nil, false},
		{"tiered: targets.tools names the tool", []Rule{
			{ID: "cap", Effect: "deny", Targets: &Targets{Tools: []string{"pay"}}, Conditions: []Condition{over("kwargs.amount")}},
			{ID: "pay", Effect: "allow", Targets: &Targets{Tools: []string{"pay"}}},
		}, []string{`tool "pay"'s arguments are read only as kwargs`}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Policy{ID: "p", Rules: tt.rules}
			if tt.tiered {
				p.Evaluation = EvaluationTiered
			}
			if problems := CheckPolicy(p); len(problems) > 0 {
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
