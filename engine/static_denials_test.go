package engine

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestArgumentFreeDenials(t *testing.T) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	eq := func(field string, v any) Condition { return Condition{Field: field, Operator: "eq", Value: raw(v)} }
	b := Bundle{Policies: []Policy{
		{ID: "ordered", DefaultEffect: "allow", Rules: []Rule{
			{ID: "allow-pay-small", Effect: "allow", Conditions: []Condition{eq("tool_name", "pay"), {Field: "input.amount", Operator: "lt", Value: raw(10)}}},
			{ID: "pay-cap", Effect: "deny", Conditions: []Condition{eq("tool_name", "pay"), {Field: "input.amount", Operator: "gt", Value: raw(100)}}},
			{ID: "no-delete", Effect: "deny", Conditions: []Condition{eq("tool_name", "delete_file")}},
			{ID: "no-github-writes", Effect: "deny", Targets: &Targets{Servers: []string{"github"}},
				Conditions: []Condition{{Any: []Condition{eq("tool_name", "push"), eq("tool_name", "merge")}}}},
			{ID: "bot-no-read", Effect: "deny", Subjects: &Subjects{Agents: []string{"bot"}}, Conditions: []Condition{eq("tool_name", "read_file")}},
			{ID: "role-no-read", Effect: "deny", Subjects: &Subjects{Roles: []string{"intern"}}, Conditions: []Condition{eq("tool_name", "read_file")}},
			{ID: "night", Effect: "deny", When: &When{Schedule: []Window{{From: "00:00", To: "06:00"}}}},
			{ID: "grouped-input", Effect: "deny", Conditions: []Condition{{Any: []Condition{eq("tool_name", "x"), eq("input.y", 1)}}}},
			{ID: "warn-list", Effect: "warn", Conditions: []Condition{eq("tool_name", "list")}},
		}},
		{ID: "tiered", Evaluation: EvaluationTiered, DefaultEffect: "deny", Rules: []Rule{
			{ID: "tiered-deny", Effect: "deny", Conditions: []Condition{eq("tool_name", "read_file")}},
		}},
		{ID: "only-input", DefaultEffect: "deny", Rules: []Rule{
			{ID: "in", Effect: "deny", Conditions: []Condition{eq("input.path", "/")}},
		}},
	}}
	before, _, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	static := ArgumentFreeDenials(b, []string{"tool_name", "server", "action", "framework", "agent_id"})
	if after, _, _ := Encode(b); string(after) != string(before) {
		t.Fatal("ArgumentFreeDenials modified its bundle")
	}
	var ids []string
	for _, p := range static.Policies {
		for _, r := range p.Rules {
			ids = append(ids, p.ID+"/"+r.ID)
		}
	}
	want := []string{"ordered/no-delete", "ordered/no-github-writes", "ordered/bot-no-read"}
	if len(ids) != len(want) {
		t.Fatalf("kept %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("kept %v, want %v", ids, want)
		}
	}
	c, diags := Compile(static)
	if len(diags) > 0 {
		t.Fatalf("the static bundle does not compile: %v", diags)
	}
	for _, tc := range []struct {
		tool, server, agent string
		denied              string // the rule, "" when allowed
	}{
		{"delete_file", "files", "anyone", "no-delete"},
		{"pay", "files", "anyone", ""},
		{"push", "github", "anyone", "no-github-writes"},
		{"push", "gitlab", "anyone", ""},
		{"read_file", "files", "bot", "bot-no-read"},
		{"read_file", "files", "BOT", "bot-no-read"},
		{"read_file", "files", "other", ""},
	} {
		req := Request{"tool_name": tc.tool, "server": tc.server, "action": "call", "framework": "mcp", "agent_id": tc.agent}
		res := c.Evaluate(req, EvalOptions{})
		got := ""
		if res.Decision == Deny && res.Code == "" {
			got = res.MatchedRuleID
		}
		if got != tc.denied {
			t.Errorf("%s on %s for %s: denied by %q, want %q (%+v)", tc.tool, tc.server, tc.agent, got, tc.denied, res)
		}
		// Whatever decides statically also decides b, with any input.
		if tc.denied != "" {
			for _, input := range []any{nil, map[string]any{"amount": 5.0, "path": "/"}, "x"} {
				full, _ := Compile(b)
				req["input"] = input
				if r := full.Evaluate(req, EvalOptions{}); r.Decision != Deny {
					t.Errorf("%s with input %v: b allows what the static part denies", tc.tool, input)
				}
			}
		}
	}
	if got := ArgumentFreeDenials(b, nil); len(got.Policies) != 0 {
		t.Fatalf("with no static fields kept %+v", got.Policies)
	}
}

// An Audit policy never denies, so it hides no tool; a rule an exception
// names does not deny its exempted agents, so it is not argument-free; a
// ClusterPolicy's deny denies whatever the namespace allows.
func TestArgumentFreeDenialsLevels(t *testing.T) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	deny := func(id, tool string) Rule {
		return Rule{ID: id, Effect: "deny", Conditions: []Condition{{Field: "tool_name", Operator: "eq", Value: raw(tool)}}}
	}
	b := Bundle{
		Policies: []Policy{
			{ID: "guard", Kind: KindClusterPolicy, Rules: []Rule{deny("no-delete", "delete_file"), deny("no-drop", "drop")}},
			{ID: "candidate", Mode: ModeAudit, Rules: []Rule{deny("no-read", "read_file")}},
			{ID: "guard", Rules: []Rule{deny("no-push", "push")}},
		},
		Exceptions: []Exception{{Name: "x", PolicyKind: KindClusterPolicy, Policy: "guard", RuleIDs: []string{"no-drop"}, AgentIDs: []string{"dba"}}},
	}
	var ids []string
	for _, p := range ArgumentFreeDenials(b, []string{"tool_name"}).Policies {
		for _, r := range p.Rules {
			ids = append(ids, p.ID+"/"+r.ID)
		}
	}
	if want := "[guard/no-delete guard/no-push]"; fmt.Sprint(ids) != want {
		t.Fatalf("kept %v, want %s", ids, want)
	}
}
