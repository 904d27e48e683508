package lint

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

func TestLint(t *testing.T) {
	t.Parallel()
	bash := engine.Condition{Field: "tool_name", Operator: "eq", Value: raw("Bash")}
	rmrf := engine.Condition{Field: "input.command", Operator: "contains", Value: raw("rm -rf")}
	table := func(names ...string) *engine.Targets {
		return &engine.Targets{Resources: []engine.ResourceTarget{{Type: "table", Names: names}}}
	}
	tests := []struct {
		name   string
		rules  []engine.Rule
		want   []string // substrings, one per expected warning, in order
		tiered bool
	}{
		{"clean", []engine.Rule{
			{ID: "a", Effect: "deny", Conditions: []engine.Condition{bash, rmrf}},
			{ID: "b", Effect: "allow", Conditions: []engine.Condition{bash}},
		}, nil, false},
		{"unreachable after unconditional deny", []engine.Rule{
			{ID: "stop", Effect: "deny"},
			{ID: "never", Effect: "allow", Conditions: []engine.Condition{bash}},
			{ID: "never-either", Effect: "deny", Conditions: []engine.Condition{rmrf}},
		}, []string{`rule "never" can never match: rule 0 ("stop")`, `rule "never-either" can never match`}, false},
		{"unanchored tool_name regex", []engine.Rule{
			{ID: "gh", Effect: "deny", Conditions: []engine.Condition{{Field: "tool_name", Operator: "matches", Value: raw("mcp__github__")}}},
			{ID: "anchored", Effect: "deny", Conditions: []engine.Condition{{Field: "tool_name", Operator: "matches", Value: raw("^mcp__github__delete_.*$")}}},
			{ID: "prefix", Effect: "deny", Conditions: []engine.Condition{{Field: "tool_name", Operator: "matches", Value: raw("^mcp__github__(create|delete)_")}}},
			{ID: "suffix", Effect: "deny", Conditions: []engine.Condition{{Field: "tool_name", Operator: "matches", Value: raw("_delete$")}}},
			{ID: "other-field", Effect: "deny", Conditions: []engine.Condition{{Field: "input.command", Operator: "matches", Value: raw("rm")}}},
		}, []string{`pattern "mcp__github__" on tool_name is not anchored`}, false},
		{"identical conditions, opposite effects, any order", []engine.Rule{
			{ID: "no", Effect: "deny", Conditions: []engine.Condition{bash, rmrf}},
			{ID: "yes", Effect: "allow", Conditions: []engine.Condition{rmrf, bash}},
		}, []string{`rule "yes" has the same conditions as rule 0 ("no") with the opposite effect; rule "no" always wins`}, false},
		{"same effect is not a conflict", []engine.Rule{
			{ID: "a", Effect: "deny", Conditions: []engine.Condition{bash}},
			{ID: "b", Effect: "deny", Conditions: []engine.Condition{bash}},
		}, nil, false},
		{"numbers compare by value", []engine.Rule{
			{ID: "a", Effect: "allow", Conditions: []engine.Condition{{Field: "kwargs.amount", Operator: "gt", Value: raw(1000)}}},
			{ID: "b", Effect: "deny", Conditions: []engine.Condition{{Field: "kwargs.amount", Operator: "gt", Value: []byte("1000.0")}}},
		}, []string{`rule "b" always wins`}, false},
		{"a scoped deny does not block the rules after it", []engine.Rule{
			{ID: "stop-bots", Effect: "deny", Subjects: &engine.Subjects{Roles: []string{"bot"}}},
			{ID: "yes", Effect: "allow", Conditions: []engine.Condition{bash}},
			{ID: "no", Effect: "deny", Targets: &engine.Targets{Tools: []string{"Bash"}}, Conditions: []engine.Condition{bash}},
		}, nil, false},
		{"allow rules with limits apply only past them", []engine.Rule{
			{ID: "pay", Effect: "allow", When: &engine.When{RateLimit: &engine.Limit{Max: 10, Window: "1h"}}},
			{ID: "chat", Effect: "allow", When: &engine.When{TokenBudget: &engine.Limit{Max: 1000, Window: "1d"}}},
			{ID: "cap", Effect: "deny", When: &engine.When{RateLimit: &engine.Limit{Max: 10, Window: "1h"}}},
		}, []string{`spec.rules[0].when.rateLimit: an allow rule with rateLimit applies only once the limit is reached`,
			`spec.rules[1].when.tokenBudget: an allow rule with tokenBudget applies only once the budget`}, false},
		{"shared and per-namespace limits: failOpen, and a namespace counted per sidecar", []engine.Rule{
			{ID: "shared", Effect: "deny", When: &engine.When{RateLimit: &engine.Limit{Max: 10, Window: "1h", Per: engine.PerNamespace, Store: engine.StoreShared}}},
			{ID: "open", Effect: "deny", When: &engine.When{TokenBudget: &engine.Limit{Max: 10, Window: "1h", Store: engine.StoreShared, FailOpen: true}}},
			{ID: "local-ns", Effect: "deny", When: &engine.When{RateLimit: &engine.Limit{Max: 10, Window: "1h", Per: engine.PerNamespace}}},
			{ID: "local-ns-written", Effect: "deny", When: &engine.When{TokenBudget: &engine.Limit{Max: 10, Window: "1h", Per: engine.PerNamespace, Store: engine.StoreLocal}}},
			{ID: "agent-local", Effect: "deny", When: &engine.When{RateLimit: &engine.Limit{Max: 10, Window: "1h", Store: engine.StoreLocal}}},
		}, []string{`spec.rules[1].when.tokenBudget.failOpen: failOpen lets calls through uncounted while the usage store is down`,
			`spec.rules[2].when.rateLimit.per: per: namespace with store: local counts per sidecar: with N replicas the namespace may make N x max calls`,
			`spec.rules[3].when.tokenBudget.per: per: namespace with store: local counts per sidecar`}, false},
		{"tiered: resourceType without a resource binding never holds", []engine.Rule{
			{ID: "tables", Effect: "allow", Select: &engine.Select{ResourceType: "table"}},
			{ID: "bound", Effect: "allow", Targets: table("orders"), Select: &engine.Select{ResourceType: "table"}},
		}, []string{`spec.rules[0].select.resourceType: rule "tables" can never apply`}, true},
		{"tiered: a resource bound only by deny, warn or audit rules", []engine.Rule{
			{ID: "no-drop", Effect: "deny", Priority: 10, Targets: table("orders", "invoices")},
			{ID: "audit", Effect: "audit", Targets: table("invoices")},
			{ID: "read", Effect: "allow", Targets: table("orders")},
		}, []string{`resource table/invoices is bound only by deny, warn or audit rules`}, true},
		{"tiered: order-based checks do not apply", []engine.Rule{
			{ID: "stop", Effect: "deny"},
			{ID: "exception", Effect: "allow", Priority: 1},
			{ID: "same", Effect: "deny", Conditions: []engine.Condition{bash}},
			{ID: "opposite", Effect: "allow", Conditions: []engine.Condition{bash}},
		}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := engine.Policy{ID: "p", Rules: tt.rules}
			if tt.tiered {
				p.Evaluation = engine.EvaluationTiered
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

// Review refuses what does not compile, without warnings, and warns about
// what compiles but probably is a mistake.
func TestReview(t *testing.T) {
	t.Parallel()
	lints := engine.Policy{ID: "p", Rules: []engine.Rule{
		{ID: "stop", Effect: "deny"},
		{ID: "never", Effect: "allow", Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: raw("Bash")}}},
	}}
	if problems, warnings := Review(lints); len(problems) != 0 || len(warnings) != 1 {
		t.Errorf("a policy that compiles: problems %v, warnings %v; want one warning", problems, warnings)
	}
	broken := lints
	broken.Rules = append([]engine.Rule{{ID: "bad", Effect: "maybe"}}, lints.Rules...)
	if problems, warnings := Review(broken); len(problems) == 0 || len(warnings) != 0 {
		t.Errorf("a policy that does not compile: problems %v, warnings %v; want problems only", problems, warnings)
	}
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
