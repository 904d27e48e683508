package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func mustCompile(tb testing.TB, b Bundle) *Compiled {
	tb.Helper()
	c, diags := Compile(b)
	if len(diags) > 0 {
		tb.Fatalf("unexpected diagnostics: %v", diags)
	}
	return c
}

// byToolBundle: rule i = tool_name eq tool_i AND input.command contains
// danger_i AND kwargs.amount gt i (the FINDINGS reference scenario).
func byToolBundle(n int) Bundle {
	rules := make([]Rule, n)
	for i := range rules {
		rules[i] = Rule{ID: fmt.Sprintf("r%d", i), Effect: "deny", Conditions: []Condition{
			{Field: "tool_name", Operator: "eq", Value: raw(fmt.Sprintf("tool_%d", i))},
			{Field: "input.command", Operator: "contains", Value: raw(fmt.Sprintf("danger_%d", i))},
			{Field: "kwargs.amount", Operator: "gt", Value: raw(i)},
		}}
	}
	return Bundle{Policies: []Policy{{ID: "p", Version: 1, DefaultEffect: "allow", Rules: rules}}}
}

// byToolPolicies is byToolBundle's rules over several policies of n rules
// each (a policy holds at most MaxRulesPerPolicy): rule i of the whole set
// pins tool_i.
func byToolPolicies(policies, n int) Bundle {
	var out Bundle
	for p := range policies {
		pol := byToolBundle(n).Policies[0]
		pol.ID = fmt.Sprintf("p%02d", p)
		for i := range pol.Rules {
			k := p*n + i
			pol.Rules[i].Conditions[0].Value = raw(fmt.Sprintf("tool_%d", k))
			pol.Rules[i].Conditions[1].Value = raw(fmt.Sprintf("danger_%d", k))
			pol.Rules[i].Conditions[2].Value = raw(k)
		}
		out.Policies = append(out.Policies, pol)
	}
	return out
}

// withClusterLevel adds a ClusterPolicy of n rules of byToolBundle's shape,
// pinned to tools tool_1000.., the last anyTool of them on every tool
// (input.command contains "rm -rf /guard-i").
func withClusterLevel(ns Bundle, n, anyTool int) Bundle {
	cp := byToolPolicies(2, n).Policies[1] // tools n..2n-1: rename below
	cp.ID, cp.Kind = "org-guardrails", KindClusterPolicy
	for i := range cp.Rules {
		cp.Rules[i].Conditions[0].Value = raw(fmt.Sprintf("tool_%d", 1000+i))
		if i >= n-anyTool {
			cp.Rules[i].Conditions = []Condition{{Field: "input.command", Operator: "contains", Value: raw(fmt.Sprintf("rm -rf /guard-%d", i))}}
		}
	}
	ns.Policies = append(ns.Policies, cp)
	return ns
}

// tieredByToolBundle: n tiered rules, rule i bound to tool_i, scoped to
// agent-i or the ci role, with one condition; odd rules sit a tier higher.
func tieredByToolBundle(n int) Bundle {
	rules := make([]Rule, n)
	for i := range rules {
		rules[i] = Rule{ID: fmt.Sprintf("r%d", i), Effect: "deny", Priority: int32(i % 2),
			Subjects: &Subjects{Agents: []string{fmt.Sprintf("agent-%d", i)}, Roles: []string{"ci"}},
			Targets:  &Targets{Tools: []string{fmt.Sprintf("tool_%d", i)}},
			Conditions: []Condition{
				{Field: "input.command", Operator: "contains", Value: raw(fmt.Sprintf("danger_%d", i))},
			}}
	}
	return Bundle{Policies: []Policy{{ID: "p", Version: 1, Evaluation: EvaluationTiered, Rules: rules}}}
}

// tieredResourceBundle: n rules bound to tables t0..t(tables-1) in turn
// (n/tables rules per table), allowing the analyst role in tier 0 and
// denying DROP in tier 1.
func tieredResourceBundle(n, tables int) Bundle {
	rules := make([]Rule, n)
	for i := range rules {
		r := Rule{ID: fmt.Sprintf("r%d", i), Effect: "allow", Priority: 0,
			Subjects: &Subjects{Roles: []string{"analyst"}},
			Targets: &Targets{Servers: []string{"db"},
				Resources: []ResourceTarget{{Type: "table", Names: []string{fmt.Sprintf("t%d", i%tables)}}}},
			When: &When{Sensitivity: []string{"pii"}},
			Conditions: []Condition{
				{Field: "resource.name", Operator: "starts_with", Value: raw("t")},
			}}
		if (i/tables)%2 == 1 {
			r.Effect, r.Priority = "deny", 1
			r.Conditions = []Condition{{Field: "input.sql", Operator: "contains", Value: raw("DROP")}}
		}
		rules[i] = r
	}
	return Bundle{Policies: []Policy{{ID: "p", Version: 1, Evaluation: EvaluationTiered, Rules: rules}}}
}

func scanBundle(n int) Bundle {
	rules := make([]Rule, n)
	for i := range rules {
		rules[i] = Rule{ID: fmt.Sprintf("r%d", i), Effect: "deny", Conditions: []Condition{
			{Field: "input.command", Operator: "contains", Value: raw(fmt.Sprintf("forbidden-literal-%d", i))},
		}}
	}
	return Bundle{Policies: []Policy{{ID: "p", Version: 1, DefaultEffect: "allow", Rules: rules}}}
}

func BenchmarkEvaluate(b *testing.B) {
	opts := EvalOptions{}
	run := func(b *testing.B, c *Compiled, req Request, want Decision) {
		b.Helper()
		if got := c.Evaluate(req, opts); got.Decision != want {
			b.Fatalf("decision %s, want %s: %+v", got.Decision, want, got)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			c.Evaluate(req, opts)
		}
	}
	b.Run("rules=1000/by-tool", func(b *testing.B) {
		c := mustCompile(b, byToolBundle(1000))
		req := Request{"tool_name": "tool_500", "agent_id": "agent-1",
			"input": map[string]any{"command": "run danger_500 now"}, "kwargs": map[string]any{"amount": 5000.0}}
		run(b, c, req, Deny)
	})
	// Issue 26's target: 100 ClusterPolicy rules beside the namespace's
	// 1,000 decide within 1.2x of rules=1000/by-tool (same request, side by
	// side in one run). The cluster rules have the reference scenario's
	// shape, pinned to tools tool_1000..tool_1099.
	b.Run("rules=1000+cluster=100/by-tool", func(b *testing.B) {
		c := mustCompile(b, withClusterLevel(byToolBundle(1000), 100, 0))
		req := Request{"tool_name": "tool_500", "agent_id": "agent-1",
			"input": map[string]any{"command": "run danger_500 now"}, "kwargs": map[string]any{"amount": 5000.0}}
		run(b, c, req, Deny)
	})
	// The same with 10 of the cluster rules on every tool (guardrails such
	// as "no rm -rf anywhere"): each is checked on every call.
	b.Run("rules=1000+cluster=100/10-any-tool", func(b *testing.B) {
		c := mustCompile(b, withClusterLevel(byToolBundle(1000), 100, 10))
		req := Request{"tool_name": "tool_500", "agent_id": "agent-1",
			"input": map[string]any{"command": "run danger_500 now"}, "kwargs": map[string]any{"amount": 5000.0}}
		run(b, c, req, Deny)
	})
	b.Run("rules=10000/by-tool", func(b *testing.B) {
		c := mustCompile(b, byToolPolicies(10, 1000))
		req := Request{"tool_name": "tool_9500", "agent_id": "agent-1",
			"input": map[string]any{"command": "run danger_9500 now"}, "kwargs": map[string]any{"amount": 10000.0}}
		run(b, c, req, Deny)
	})
	b.Run("tiered/rules=1000/by-tool", func(b *testing.B) {
		c := mustCompile(b, tieredByToolBundle(1000))
		req := Request{"tool_name": "tool_500", "agent_id": "agent-500", "roles": []any{"ci"},
			"input": map[string]any{"command": "run danger_500 now"}}
		run(b, c, req, Deny)
	})
	b.Run("tiered/resources=10", func(b *testing.B) {
		c := mustCompile(b, tieredResourceBundle(100, 10))
		resources := make([]any, 10)
		for i := range resources {
			resources[i] = map[string]any{"type": "table", "name": fmt.Sprintf("t%d", i), "sensitivity": []any{"pii"}}
		}
		req := Request{"tool_name": "mcp__db__query", "agent_id": "analyst-1", "roles": []any{"analyst"},
			"resources": resources, "input": map[string]any{"sql": "SELECT * FROM t1"}}
		run(b, c, req, Allow)
	})
	b.Run("rules=1000/scan", func(b *testing.B) {
		c := mustCompile(b, scanBundle(1000))
		req := Request{"tool_name": "Bash", "agent_id": "agent-1",
			"input": map[string]any{"command": "ls -la /var/log/toolgate && cat README.md"}}
		run(b, c, req, Allow)
	})
	b.Run("regex/1KiB", func(b *testing.B) {
		c := mustCompile(b, Bundle{Policies: []Policy{{ID: "p", DefaultEffect: "allow", Rules: []Rule{{
			ID: "secrets", Effect: "deny", Conditions: []Condition{
				{Field: "input.command", Operator: "matches", Value: raw(`(?i)(secret|password|token)=\S+`)},
			}}}}}})
		req := Request{"tool_name": "Bash", "input": map[string]any{"command": strings.Repeat("echo hello world; ", 57)[:1024]}}
		run(b, c, req, Allow)
	})
	// Issue 28: 100 castToNumber rules over numeric strings (" +5e3 "),
	// every one checked; none allocates.
	b.Run("cast/rules=100", func(b *testing.B) {
		c := mustCompile(b, castBundle(100))
		run(b, c, castBenchRequest, Allow)
	})
	b.Run("frozen=10000", func(b *testing.B) {
		bundle := Bundle{Policies: []Policy{{ID: "p", DefaultEffect: "allow", Rules: []Rule{{ID: "all", Effect: "allow"}}}}}
		exp := time.Now().Add(time.Hour)
		for i := range 10000 {
			f := FrozenAgent{ID: fmt.Sprintf("agent-%d", i), Reason: "incident 42"}
			if i%2 == 0 {
				f.ExpiresAt = &exp
			}
			bundle.FrozenAgents = append(bundle.FrozenAgents, f)
		}
		c := mustCompile(b, bundle)
		run(b, c, Request{"tool_name": "Bash", "agent_id": "Agent-5000"}, Deny)
	})
}

// BenchmarkCompile/policies=1000 repeats 10 patterns across policies, as
// generated policy sets do; distinct-regex shows the cost when every one of
// the 10,000 patterns is new to RE2.
func BenchmarkCompile(b *testing.B) {
	b.Run("policies=1000", func(b *testing.B) { benchCompile(b, false) })
	b.Run("policies=1000/distinct-regex", func(b *testing.B) { benchCompile(b, true) })
}

func benchCompile(b *testing.B, distinct bool) {
	var bundle Bundle
	for p := range 1000 {
		pol := Policy{ID: fmt.Sprintf("policy-%04d", p), Version: 1, Priority: int32(p % 7), DefaultEffect: "allow"}
		for r := range 10 {
			pol.Rules = append(pol.Rules, Rule{ID: fmt.Sprintf("r%d", r), Effect: "deny", Conditions: []Condition{
				{Field: "tool_name", Operator: "eq", Value: raw(fmt.Sprintf("tool_%d", r))},
				{Field: "input.command", Operator: "matches", Value: raw(pattern(p, r, distinct))},
				{Field: "kwargs.amount", Operator: "gte", Value: raw(r * 100)},
			}})
		}
		bundle.Policies = append(bundle.Policies, pol)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, d := Compile(bundle); len(d) > 0 {
			b.Fatal(d)
		}
	}
}

func pattern(p, r int, distinct bool) string {
	if distinct {
		return fmt.Sprintf(`^rm\s+-rf\s+/%d`, p*10+r)
	}
	return fmt.Sprintf(`^rm\s+-rf\s+/%d`, r)
}
