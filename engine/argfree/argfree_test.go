package argfree

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

func TestDenials(t *testing.T) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	eq := func(field string, v any) engine.Condition {
		return engine.Condition{Field: field, Operator: "eq", Value: raw(v)}
	}
	b := engine.Bundle{Policies: []engine.Policy{
		{ID: "ordered", DefaultEffect: "allow", Rules: []engine.Rule{
			{ID: "allow-pay-small", Effect: "allow", Conditions: []engine.Condition{eq("tool_name", "pay"), {Field: "input.amount", Operator: "lt", Value: raw(10)}}},
			{ID: "pay-cap", Effect: "deny", Conditions: []engine.Condition{eq("tool_name", "pay"), {Field: "input.amount", Operator: "gt", Value: raw(100)}}},
			{ID: "no-delete", Effect: "deny", Conditions: []engine.Condition{eq("tool_name", "delete_file")}},
			{ID: "no-github-writes", Effect: "deny", Targets: &engine.Targets{Servers: []string{"github"}},
				Conditions: []engine.Condition{{Any: []engine.Condition{eq("tool_name", "push"), eq("tool_name", "merge")}}}},
			{ID: "bot-no-read", Effect: "deny", Subjects: &engine.Subjects{Agents: []string{"bot"}}, Conditions: []engine.Condition{eq("tool_name", "read_file")}},
			{ID: "role-no-read", Effect: "deny", Subjects: &engine.Subjects{Roles: []string{"intern"}}, Conditions: []engine.Condition{eq("tool_name", "read_file")}},
			{ID: "night", Effect: "deny", When: &engine.When{Schedule: []engine.Window{{From: "00:00", To: "06:00"}}}},
			{ID: "grouped-input", Effect: "deny", Conditions: []engine.Condition{{Any: []engine.Condition{eq("tool_name", "x"), eq("input.y", 1)}}}},
			{ID: "warn-list", Effect: "warn", Conditions: []engine.Condition{eq("tool_name", "list")}},
		}},
		{ID: "tiered", Evaluation: engine.EvaluationTiered, DefaultEffect: "deny", Rules: []engine.Rule{
			{ID: "tiered-deny", Effect: "deny", Conditions: []engine.Condition{eq("tool_name", "read_file")}},
		}},
		{ID: "only-input", DefaultEffect: "deny", Rules: []engine.Rule{
			{ID: "in", Effect: "deny", Conditions: []engine.Condition{eq("input.path", "/")}},
		}},
	}}
	before, _, err := engine.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	static := Denials(b, []string{"tool_name", "server", "action", "framework", "agent_id"})
	if after, _, _ := engine.Encode(b); string(after) != string(before) {
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
	c, diags := engine.Compile(static)
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
		req := engine.Request{"tool_name": tc.tool, "server": tc.server, "action": "call", "framework": "mcp", "agent_id": tc.agent}
		res := c.Evaluate(req, engine.EvalOptions{})
		got := ""
		if res.Decision == engine.Deny && res.Code == "" {
			got = res.MatchedRuleID
		}
		if got != tc.denied {
			t.Errorf("%s on %s for %s: denied by %q, want %q (%+v)", tc.tool, tc.server, tc.agent, got, tc.denied, res)
		}
		// Whatever decides statically also decides b, with any input.
		if tc.denied != "" {
			for _, input := range []any{nil, map[string]any{"amount": 5.0, "path": "/"}, "x"} {
				full, _ := engine.Compile(b)
				req["input"] = input
				if r := full.Evaluate(req, engine.EvalOptions{}); r.Decision != engine.Deny {
					t.Errorf("%s with input %v: b allows what the static part denies", tc.tool, input)
				}
			}
		}
	}
	if got := Denials(b, nil); len(got.Policies) != 0 {
		t.Fatalf("with no static fields kept %+v", got.Policies)
	}
}

// An Audit policy never denies, so it hides no tool; a rule an exception
// names does not deny its exempted agents, so it is not argument-free; a
// ClusterPolicy's deny denies whatever the namespace allows.
func TestDenialsLevels(t *testing.T) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	deny := func(id, tool string) engine.Rule {
		return engine.Rule{ID: id, Effect: "deny", Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: raw(tool)}}}
	}
	b := engine.Bundle{
		Policies: []engine.Policy{
			{ID: "guard", Kind: engine.KindClusterPolicy, Rules: []engine.Rule{deny("no-delete", "delete_file"), deny("no-drop", "drop")}},
			{ID: "candidate", Mode: engine.ModeAudit, Rules: []engine.Rule{deny("no-read", "read_file")}},
			{ID: "guard", Rules: []engine.Rule{deny("no-push", "push")}},
		},
		Exceptions: []engine.Exception{{Name: "x", PolicyKind: engine.KindClusterPolicy, Policy: "guard", RuleIDs: []string{"no-drop"}, AgentIDs: []string{"dba"}}},
	}
	var ids []string
	for _, p := range Denials(b, []string{"tool_name"}).Policies {
		for _, r := range p.Rules {
			ids = append(ids, p.ID+"/"+r.ID)
		}
	}
	if want := "[guard/no-delete guard/no-push]"; fmt.Sprint(ids) != want {
		t.Fatalf("kept %v, want %s", ids, want)
	}
}
