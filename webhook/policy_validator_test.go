package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

const ns = "default"

// newPolicy builds an unstructured Policy from a YAML spec, so the tests can
// send what typed clients cannot (wrong JSON types, unknown enum values).
func newPolicy(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	var s map[string]any
	if err := yaml.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatalf("test spec is not YAML: %v\n%s", err, spec)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": s}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Policy"))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func rule(cond string) string {
	return "rules:\n- id: r1\n  effect: deny\n  conditions:\n  - " + cond + "\n"
}

func manyRules(n int) string {
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range n {
		fmt.Fprintf(&b, "- {id: r%d, effect: deny}\n", i)
	}
	return b.String()
}

func manyConditions(n int) string {
	var b strings.Builder
	b.WriteString("rules:\n- id: r1\n  effect: deny\n  conditions:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {field: f%d, operator: exists}\n", i)
	}
	return b.String()
}

func TestRejectsMalformedPolicies(t *testing.T) {
	longField := strings.Repeat("a.", 128) + "b"
	deepField := strings.TrimSuffix(strings.Repeat("a.", 17), ".")
	tests := []struct {
		name string
		spec string
		want []string // all must appear in the API server's error
	}{
		{"lookahead", rule(`{field: input.command, operator: matches, value: "rm(?=x)"}`),
			[]string{"spec.rules[0].conditions[0].value", `rule "r1" condition 0`, "does not compile", "(?="}},
		{"lookbehind", rule(`{field: input.command, operator: matches, value: "(?<!x)rm"}`),
			[]string{"spec.rules[0].conditions[0].value", "does not compile"}},
		{"backreference", rule(`{field: input.command, operator: matches, value: '(a)\1'}`),
			[]string{"spec.rules[0].conditions[0].value", "invalid escape sequence"}},
		{"unbalanced paren", rule(`{field: input.command, operator: matches, value: "(rm"}`),
			[]string{"missing closing )"}},
		{"bad class range", rule(`{field: input.command, operator: matches, value: "[z-a]"}`),
			[]string{"invalid character class range"}},
		{"bad repeat", rule(`{field: input.command, operator: matches, value: "a**"}`),
			[]string{"invalid nested repetition operator"}},
		{"repeat too large", rule(`{field: input.command, operator: matches, value: "a{2000}"}`),
			[]string{"invalid repeat count"}},
		{"pattern too long", rule(`{field: input.command, operator: matches, value: "` + strings.Repeat("a", 4097) + `"}`),
			[]string{"more than 4096"}},
		{"matches with a number", rule(`{field: input.command, operator: matches, value: 5}`),
			[]string{"needs a string value, not a number"}},
		{"unknown operator", rule(`{field: tool_name, operator: like, value: Bash}`),
			[]string{"spec.rules[0].conditions[0].operator", `Unsupported value: "like"`}},
		{"contains with a number", rule(`{field: input.command, operator: contains, value: 42}`),
			[]string{"spec.rules[0].conditions[0].value", "needs a string value, not a number"}},
		{"starts_with with a boolean", rule(`{field: input.path, operator: starts_with, value: true}`),
			[]string{"needs a string value, not a boolean"}},
		{"gt with a string", rule(`{field: kwargs.amount, operator: gt, value: "1000"}`),
			[]string{"needs a number value, not a string"}},
		{"lte with a boolean", rule(`{field: kwargs.amount, operator: lte, value: false}`),
			[]string{"needs a number value, not a boolean"}},
		{"gte without a value", rule(`{field: kwargs.amount, operator: gte}`),
			[]string{"operator gte needs a value"}},
		{"in without values", rule(`{field: tool_name, operator: in}`),
			[]string{"operator in needs values"}},
		{"not_in with an object", rule(`{field: tool_name, operator: not_in, values: [Read, {a: 1}]}`),
			[]string{"spec.rules[0].conditions[0].values[1]", "must be a string, number or boolean, not an object"}},
		{"eq with an object", rule(`{field: input, operator: eq, value: {a: 1}}`),
			[]string{"not an object"}},
		{"eq with a list value", rule(`{field: input, operator: eq, value: [1, 2]}`),
			[]string{"not an array"}},
		{"value and values", rule(`{field: tool_name, operator: in, value: Read, values: [Glob]}`),
			[]string{"set value or values, not both"}},
		{"exists with a value", rule(`{field: input.command, operator: exists, value: x}`),
			[]string{"operator exists takes no value"}},
		{"eq with values", rule(`{field: tool_name, operator: eq, values: [a]}`),
			[]string{"takes a single value, not a list"}},
		{"empty field", rule(`{field: "", operator: exists}`),
			[]string{"spec.rules[0].conditions[0].field"}},
		{"empty segment", rule(`{field: "input..command", operator: exists}`),
			[]string{"spec.rules[0].conditions[0].field", "should match"}},
		{"__proto__", rule(`{field: "input.__proto__.x", operator: exists}`),
			[]string{`forbidden segment "__proto__"`}},
		{"constructor", rule(`{field: "kwargs.constructor", operator: exists}`),
			[]string{`forbidden segment "constructor"`}},
		{"prototype", rule(`{field: "prototype", operator: exists}`),
			[]string{`forbidden segment "prototype"`}},
		{"too many segments", rule(`{field: "` + deepField + `", operator: exists}`),
			[]string{"spec.rules[0].conditions[0].field", "should match"}},
		{"field too long", rule(`{field: "` + longField + `", operator: exists}`),
			[]string{"spec.rules[0].conditions[0].field", "256"}},
		{"duplicate rule ids", "rules:\n- {id: same, effect: deny}\n- {id: same, effect: allow}\n",
			[]string{"spec.rules[1]", "Duplicate value"}},
		{"rule id not a DNS label", "rules:\n- {id: Bad_ID, effect: deny}\n",
			[]string{"spec.rules[0].id"}},
		{"rule id too long", "rules:\n- {id: " + strings.Repeat("a", 64) + ", effect: deny}\n",
			[]string{"spec.rules[0].id", "63"}},
		{"missing rule id", "rules:\n- {effect: deny}\n",
			[]string{"spec.rules[0].id", "Required value"}},
		{"bad effect", "rules:\n- {id: r1, effect: block}\n",
			[]string{"spec.rules[0].effect", `Unsupported value: "block"`}},
		{"bad defaultEffect", "defaultEffect: maybe\n" + manyRules(1),
			[]string{"spec.defaultEffect", `Unsupported value: "maybe"`}},
		{"no rules", "rules: []\n", []string{"spec.rules"}},
		{"rules missing", "priority: 3\n", []string{"spec.rules", "Required value"}},
		{"too many rules", manyRules(1001), []string{"spec.rules", "1000"}},
		{"too many conditions", manyConditions(65), []string{"spec.rules[0].conditions", "64"}},
		{"description too long", "rules:\n- {id: r1, effect: deny, description: " + strings.Repeat("d", 1025) + "}\n",
			[]string{"spec.rules[0].description"}},
		{"priority not an integer", "priority: high\n" + manyRules(1), []string{"spec.priority"}},
		{"two errors reported together", "rules:\n- id: r1\n  effect: deny\n  conditions:\n  - {field: a, operator: matches, value: '(?=x)'}\n  - {field: b, operator: gt, value: x}\n",
			[]string{"spec.rules[0].conditions[0].value", "spec.rules[0].conditions[1].value"}},
	}
	if len(tests) < 30 {
		t.Fatalf("the table must keep at least 30 cases, has %d", len(tests))
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, fmt.Sprintf("bad-%d", i), tt.spec)
			err := k8sClient.Create(context.Background(), p)
			if err == nil {
				t.Fatalf("the API server accepted it")
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("error is not Invalid/BadRequest: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestAcceptsValidPoliciesWithWarnings(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want []string
	}{
		{"samples-like", "priority: 10\ndefaultEffect: deny\nrules:\n" +
			"- {id: no-rm, effect: deny, conditions: [{field: tool_name, operator: eq, value: Bash}, {field: input.command, operator: matches, value: 'rm\\s+-rf'}]}\n" +
			"- {id: pay-cap, effect: deny, conditions: [{field: kwargs.amount, operator: gt, value: 1000}]}\n" +
			"- {id: read-only, effect: allow, conditions: [{field: tool_name, operator: in, values: [Read, Glob, 7, true]}]}\n" +
			"- {id: json, effect: deny, conditions: [{field: input.payload, operator: is_valid_json}, {field: args.0, operator: not_exists}]}\n",
			nil},
		{"no conditions", "rules:\n- {id: everything, effect: allow}\n", nil},
		{"unanchored tool_name regex", rule(`{field: tool_name, operator: matches, value: "mcp__github__delete"}`),
			[]string{"spec.rules[0].conditions[0].value", "not anchored"}},
		{"unreachable rule", "rules:\n- {id: stop, effect: deny}\n- {id: later, effect: allow, conditions: [{field: tool_name, operator: eq, value: Read}]}\n",
			[]string{"spec.rules[1].id", `rule "later" can never match`}},
		{"opposite twins", "rules:\n- {id: a, effect: allow, conditions: [{field: tool_name, operator: eq, value: Bash}]}\n- {id: b, effect: deny, conditions: [{field: tool_name, operator: eq, value: Bash}]}\n",
			[]string{"spec.rules[1].conditions", "opposite effect"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			warnings.take()
			p := newPolicy(t, fmt.Sprintf("good-%d", i), tt.spec)
			if err := k8sClient.Create(context.Background(), p); err != nil {
				t.Fatalf("rejected: %v", err)
			}
			got := warnings.take()
			if len(got) != len(tt.want) && !(len(tt.want) > 0 && len(got) == 1) {
				t.Errorf("warnings %q, want ones mentioning %q", got, tt.want)
			}
			all := strings.Join(got, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("warnings %q do not mention %q", got, w)
				}
			}
			if len(tt.want) == 0 && len(got) > 0 {
				t.Errorf("unexpected warnings: %q", got)
			}
			// Updates go through the same validation.
			spec := p.Object["spec"].(map[string]any)
			spec["rules"] = []any{map[string]any{"id": "x", "effect": "deny", "conditions": []any{
				map[string]any{"field": "a", "operator": "matches", "value": "(?=x)"}}}}
			if err := k8sClient.Update(context.Background(), p); err == nil || !strings.Contains(err.Error(), "does not compile") {
				t.Errorf("update with a bad regex: %v", err)
			}
		})
	}
}

func TestFrozenAgentBypassesWebhooks(t *testing.T) {
	// FrozenAgent is validated by its schema only: the kill switch must not
	// depend on the webhook server being up.
	f := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"agentId": "agent-7"}}}
	f.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("FrozenAgent"))
	f.SetNamespace(ns)
	f.SetName("freeze")
	if err := k8sClient.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	bad := f.DeepCopy()
	bad.SetName("freeze-bad")
	bad.Object["spec"] = map[string]any{"reason": "no agent"}
	if err := k8sClient.Create(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "agentId, serviceAccount or allAgents: true is required") {
		t.Errorf("a FrozenAgent without agentId or serviceAccount: %v", err)
	}
	bad.Object["spec"] = map[string]any{"agentId": " agent-7"}
	if err := k8sClient.Create(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "must not start or end with whitespace") {
		t.Errorf("a FrozenAgent with a padded agentId: %v", err)
	}
	// CEL transition rule: the agent of a freeze cannot be swapped in place
	// (that would silently unfreeze the first agent); the reason can change.
	f.Object["spec"] = map[string]any{"agentId": "agent-8"}
	if err := k8sClient.Update(context.Background(), f); err == nil || !strings.Contains(err.Error(), "agentId is immutable") {
		t.Errorf("changing agentId: %v", err)
	}
	f.Object["spec"] = map[string]any{"agentId": "agent-7", "reason": "now with a reason"}
	if err := k8sClient.Update(context.Background(), f); err != nil {
		t.Errorf("changing the reason: %v", err)
	}
}
