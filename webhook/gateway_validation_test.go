package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// webhookDenied starts every error the Policy webhook returns through the
// API server; a rejection by the CRD's schema or CEL rules has no such
// prefix.
const webhookDenied = `admission webhook "vpolicy.toolgate.dev" denied the request`

// TestRejectsMalformedGatewayFields (issue 9): every malformed new field is
// refused with its field path, by the layer that can tell: the API server's
// schema and CEL rules for what they can express (so it holds with the
// webhook down), the webhook (engine.CheckPolicy) for the rest. The client
// does not ask for strict field validation, so nothing here relies on it.
func TestRejectsMalformedGatewayFields(t *testing.T) {
	when := func(w string) string { return "rules:\n- id: r1\n  effect: deny\n  when: " + w + "\n" }
	tests := []refusedCase{
		{"unknown evaluation", "evaluation: ranked\n" + manyRules(1), schema,
			[]string{"spec.evaluation", `Unsupported value: "ranked"`}},
		{"unknown rule effect", "rules:\n- {id: r1, effect: notify}\n", schema,
			[]string{"spec.rules[0].effect", `Unsupported value: "notify"`, `"warn", "audit"`}},
		{"defaultEffect warn", "defaultEffect: warn\n" + manyRules(1), schema,
			[]string{"spec.defaultEffect", `Unsupported value: "warn"`}},
		{"priority in an ordered policy", "rules:\n- {id: r1, effect: deny}\n- {id: r2, effect: allow, priority: 5}\n", schema,
			[]string{"spec.rules: Invalid value", "spec.rules[].priority (non-zero) is only allowed when spec.evaluation is tiered"}},
		{"priority with evaluation: ordered", "evaluation: ordered\nrules:\n- {id: r1, effect: deny, priority: -1}\n", schema,
			[]string{"spec.rules[].priority (non-zero) is only allowed when spec.evaluation is tiered"}},
		{"unknown day", when(`{schedule: [{days: [mon, Tue], from: "08:00", to: "18:00"}]}`), schema,
			[]string{"spec.rules[0].when.schedule[0].days[1]", `Unsupported value: "Tue"`}},
		{"repeated day", when(`{schedule: [{days: [mon, mon], from: "08:00", to: "18:00"}]}`), schema,
			[]string{"spec.rules[0].when.schedule[0].days[1]", "Duplicate value"}},
		{"bad HH:MM", when(`{schedule: [{from: "8:00", to: "18:00"}]}`), schema,
			[]string{"spec.rules[0].when.schedule[0].from", "should match"}},
		{"minutes out of range", when(`{schedule: [{from: "08:00", to: "18:60"}]}`), schema,
			[]string{"spec.rules[0].when.schedule[0].to", "should match"}},
		{"from equals to", when(`{schedule: [{from: "09:00", to: "09:00"}]}`), schema,
			[]string{"spec.rules[0].when.schedule[0]", "from and to must differ"}},
		{"window without to", when(`{schedule: [{from: "09:00"}]}`), schema,
			[]string{"spec.rules[0].when.schedule[0].to", "Required value"}},
		{"empty schedule", when(`{schedule: []}`), schema,
			[]string{"spec.rules[0].when.schedule", "at least 1 items"}},
		{"empty when", when(`{}`), schema,
			[]string{"spec.rules[0].when", "at least 1 properties"}},
		{"empty agents", "rules:\n- {id: r1, effect: deny, subjects: {agents: []}}\n", schema,
			[]string{"spec.rules[0].subjects.agents", "at least 1 items"}},
		{"empty role", "rules:\n- {id: r1, effect: deny, subjects: {roles: [\"\"]}}\n", schema,
			[]string{"spec.rules[0].subjects.roles[0]", "at least 1 chars"}},
		{"empty targets", "rules:\n- {id: r1, effect: deny, targets: {}}\n", schema,
			[]string{"spec.rules[0].targets", "at least 1 properties"}},
		{"resource without names", "rules:\n- {id: r1, effect: deny, targets: {resources: [{type: table}]}}\n", schema,
			[]string{"spec.rules[0].targets.resources[0].names", "Required value"}},
		{"empty sideEffect", "rules:\n- {id: r1, effect: deny, select: {sideEffect: []}}\n", schema,
			[]string{"spec.rules[0].select.sideEffect", "at least 1 items"}},
		{"empty select.context", "rules:\n- {id: r1, effect: deny, select: {context: {}}}\n", schema,
			[]string{"spec.rules[0].select.context", "at least 1 properties"}},
		{"rateLimit max 0", when(`{rateLimit: {max: 0, window: 1m}}`), schema,
			[]string{"spec.rules[0].when.rateLimit.max", "greater than or equal to 1"}},
		{"tokenBudget max negative", when(`{tokenBudget: {max: -1, window: 1h}}`), schema,
			[]string{"spec.rules[0].when.tokenBudget.max", "greater than or equal to 1"}},
		{"rateLimit per pod", when(`{rateLimit: {max: 1, window: 1m, per: pod}}`), schema,
			[]string{"spec.rules[0].when.rateLimit.per", `Unsupported value: "pod"`}},
		{"rateLimit without window", when(`{rateLimit: {max: 1}}`), schema,
			[]string{"spec.rules[0].when.rateLimit.window", "Required value"}},
		{"empty any", rule(`{any: []}`), schema,
			[]string{"spec.rules[0].conditions[0].any", "at least 1 items"}},
		{"empty all", rule(`{any: [{all: []}]}`), schema,
			[]string{"spec.rules[0].conditions[0].any[0].all", "at least 1 items"}},
		{"test and group at once", rule(`{field: a, operator: exists, any: [{field: b, operator: exists}]}`), schema,
			[]string{"spec.rules[0].conditions[0].any", "a group (any) takes no field or operator"}},
		{"test without an operator", rule(`{field: a}`), schema,
			[]string{"spec.rules[0].conditions[0].operator", "operator is required"}},
		{"member of any without a field", rule(`{any: [{operator: exists}]}`), schema,
			[]string{"spec.rules[0].conditions[0].any[0].field", "field is required"}},
		{"any in any", rule(`{any: [{any: [{field: a, operator: exists}]}]}`), schema,
			[]string{"spec.rules[0].conditions[0].any[0].any", "must have at most 0 items"}},
		{"any below all", rule(`{any: [{all: [{field: a, operator: exists, any: [{field: b, operator: exists}]}]}]}`), schema,
			[]string{"spec.rules[0].conditions[0].any[0].all[0].any", "must have at most 0 items"}},
		{"all at the top", rule(`{all: [{field: a, operator: exists}]}`), schema,
			[]string{"spec.rules[0].conditions[0].all", "must have at most 0 items"}},

		{"unknown time zone", when(`{schedule: [{from: "08:00", to: "18:00", timeZone: Mars/Olympus_Mons}]}`), webhook,
			[]string{"spec.rules[0].when.schedule[0].timeZone", "Mars/Olympus_Mons"}},
		{"bad regex in select.tool", "rules:\n- {id: r1, effect: deny, select: {tool: '/^mcp__(?=x)/'}}\n", webhook,
			[]string{"spec.rules[0].select.tool", "(?="}},
		{"rateLimit window under 1s", when(`{rateLimit: {max: 5, window: 500ms}}`), webhook,
			[]string{"spec.rules[0].when.rateLimit.window", "500ms"}},
		{"rateLimit window zero", when(`{rateLimit: {max: 5, window: 0s}}`), webhook,
			[]string{"spec.rules[0].when.rateLimit.window", "0s"}},
		{"tokenBudget window over 31d", when(`{tokenBudget: {max: 5, window: 32d}}`), webhook,
			[]string{"spec.rules[0].when.tokenBudget.window", "32d"}},
		{"tokenBudget window in hours over 31d", when(`{tokenBudget: {max: 5, window: 745h}}`), webhook,
			[]string{"spec.rules[0].when.tokenBudget.window", "745h"}},
		{"window not a duration", when(`{rateLimit: {max: 5, window: hourly}}`), webhook,
			[]string{"spec.rules[0].when.rateLimit.window", "hourly"}},
		{"bad value inside all", rule(`{any: [{field: a, operator: exists}, {all: [{field: kwargs.amount, operator: gt, value: lots}]}]}`), webhook,
			[]string{"spec.rules[0].conditions[0].any[1].all[0].value", "needs a number value, not a string"}},
		{"bad regex inside any", rule(`{any: [{field: input.command, operator: matches, value: "(?<=x)"}]}`), webhook,
			[]string{"spec.rules[0].conditions[0].any[0].value", "does not compile"}},
		{"group with a value", rule(`{any: [{field: a, operator: exists}], value: 1}`), webhook,
			[]string{"spec.rules[0].conditions[0].any", "a group has no field, operator, value or values of its own"}},
		{"context key with a dot", "rules:\n- {id: r1, effect: deny, select: {context: {a.b: 1}}}\n", webhook,
			[]string{"spec.rules[0].select.context.a.b", `context key "a.b"`}},
		{"context key __proto__", "rules:\n- {id: r1, effect: deny, select: {context: {__proto__: 1}}}\n", webhook,
			[]string{"spec.rules[0].select.context.__proto__", "must be one non-empty key"}},
		{"context literal an object", "rules:\n- {id: r1, effect: deny, select: {context: {region: {a: 1}}}}\n", webhook,
			[]string{"spec.rules[0].select.context.region", "must be a string, number or boolean, not an object"}},
	}
	expectRefused(t, "bad-gateway", tests)
}

// TestGatewayPolicyUpdates: the same checks hold on update, and a stored
// ordered policy cannot be given a priority without becoming tiered.
func TestGatewayPolicyUpdates(t *testing.T) {
	ctx := context.Background()
	p := newPolicy(t, "gateway-update", "rules:\n- {id: r1, effect: deny, targets: {tools: [Bash]}}\n- {id: r2, effect: allow}\n")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	rules := p.Object["spec"].(map[string]any)["rules"].([]any)
	rules[1].(map[string]any)["priority"] = int64(10)
	if err := k8sClient.Update(ctx, p); err == nil || !strings.Contains(err.Error(), "only allowed when spec.evaluation is tiered") {
		t.Fatalf("a priority in an ordered policy: %v", err)
	}
	p.Object["spec"].(map[string]any)["evaluation"] = "tiered"
	if err := k8sClient.Update(ctx, p); err != nil {
		t.Fatalf("the same rules in a tiered policy: %v", err)
	}
	rules = p.Object["spec"].(map[string]any)["rules"].([]any)
	rules[0].(map[string]any)["when"] = map[string]any{"rateLimit": map[string]any{"max": int64(1), "window": "40d"}}
	if err := k8sClient.Update(ctx, p); err == nil || !strings.Contains(err.Error(), webhookDenied) ||
		!strings.Contains(err.Error(), "spec.rules[0].when.rateLimit.window") {
		t.Errorf("a 40d window on update: %v", err)
	}
}

// TestGatewayLintWarnings: what lint.Lint finds in a valid gateway policy
// comes back as admission warnings (kubectl prints them), each with the
// field it is about, and the policy is stored.
func TestGatewayLintWarnings(t *testing.T) {
	tests := []struct {
		name, spec string
		want       []string
	}{
		{"resourceType no resource evaluation reaches", "evaluation: tiered\nrules:\n- {id: r1, effect: deny, select: {resourceType: table}}\n",
			[]string{"spec.rules[0].select.resourceType: ", `rule "r1" can never apply`}},
		{"allow with a rate limit", "rules:\n- {id: r1, effect: allow, when: {rateLimit: {max: 10, window: 1h}}}\n",
			[]string{"spec.rules[0].when.rateLimit: ", "applies only once the limit is reached"}},
		{"allow with a token budget", "evaluation: tiered\nrules:\n- {id: r1, effect: allow, when: {tokenBudget: {max: 10, window: 1h}}}\n",
			[]string{"spec.rules[0].when.tokenBudget: ", "applies only once the budget is exceeded"}},
		{"resource bound only by a deny", "evaluation: tiered\nrules:\n- {id: r1, effect: deny, targets: {resources: [{type: table, names: [orders]}]}}\n",
			[]string{"spec.rules[0].targets.resources: ", "table/orders", "IMPLICIT_DENY"}},
		{"allow under a higher-tier limit: the pattern the README shows", "evaluation: tiered\nrules:\n" +
			"- {id: cap, priority: 1, effect: deny, targets: {tools: [pay]}, when: {rateLimit: {max: 10, window: 1h}}}\n" +
			"- {id: pay, effect: allow, targets: {tools: [pay]}}\n", nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admittedWarning(t, fmt.Sprintf("lint-gateway-%d", i), tt.spec, tt.want)
		})
	}
}

// admittedWarning creates a Policy named name from spec, which the webhook
// must admit with no warning (want empty) or with one warning that
// mentions every string of want.
func admittedWarning(t *testing.T, name, spec string, want []string) {
	t.Helper()
	warnings.take()
	if err := k8sClient.Create(context.Background(), newPolicy(t, name, spec)); err != nil {
		t.Fatalf("rejected: %v", err)
	}
	got := warnings.take()
	if len(want) == 0 && len(got) > 0 {
		t.Errorf("unexpected warnings: %q", got)
	}
	if len(want) > 0 && len(got) != 1 {
		t.Errorf("warnings %q, want one", got)
	}
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("warnings %q do not mention %q", got, w)
		}
	}
}
