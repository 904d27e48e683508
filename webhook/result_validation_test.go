package webhook

import (
	"context"
	"testing"
)

// TestRejectsMalformedResultRules (issue 28): what a rule's phase allows
// is refused by the CRD's CEL rules (so it holds with the webhook down);
// a detect condition's detectors by the webhook (engine.CheckPolicy),
// naming the known ones.
func TestRejectsMalformedResultRules(t *testing.T) {
	tests := []refusedCase{
		{"unknown phase", "rules:\n- {id: r1, effect: deny, phase: after}\n", schema,
			[]string{"spec.rules[0].phase", `Unsupported value: "after"`}},
		{"redact on a call rule", "rules:\n- {id: r1, effect: redact}\n", schema,
			[]string{"spec.rules[0].effect", "effect redact is only for result rules"}},
		{"redact on an explicit call rule", "rules:\n- {id: r1, effect: redact, phase: call}\n", schema,
			[]string{"spec.rules[0].effect", "effect redact is only for result rules"}},
		{"ask on a result rule", "rules:\n- {id: r1, effect: ask, phase: result}\n", schema,
			[]string{"spec.rules[0].effect", "effect ask is only for call rules"}},
		{"rateLimit on a result rule", "rules:\n- {id: r1, effect: deny, phase: result, when: {rateLimit: {max: 1, window: 1m}}}\n", schema,
			[]string{"spec.rules[0].when", "only for call rules"}},
		{"tokenBudget on a result rule", "rules:\n- {id: r1, effect: deny, phase: result, when: {tokenBudget: {max: 1, window: 1h}}}\n", schema,
			[]string{"spec.rules[0].when", "only for call rules"}},
		{"unknown detector", "rules:\n- {id: r1, effect: redact, phase: result, conditions: [{field: output.text, operator: detect, value: aws_key}]}\n", webhook,
			[]string{"spec.rules[0].conditions[0].value", `unknown detector "aws_key"`, "aws_access_key, private_key"}},
		{"unknown detector in a list", "rules:\n- {id: r1, effect: deny, conditions: [{any: [{field: input.body, operator: detect, values: [jwt, pin]}]}]}\n", webhook,
			[]string{"spec.rules[0].conditions[0].any[0].values[1]", `unknown detector "pin"`}},
		{"detect without detectors", "rules:\n- {id: r1, effect: deny, phase: result, conditions: [{field: output.text, operator: detect}]}\n", webhook,
			[]string{"spec.rules[0].conditions[0].value", "operator detect needs a detector name"}},
		{"detect with a number", "rules:\n- {id: r1, effect: deny, phase: result, conditions: [{field: output.text, operator: detect, value: 5}]}\n", webhook,
			[]string{"spec.rules[0].conditions[0].value", "operator detect takes detector names (strings)"}},
	}
	expectRefused(t, "bad-result", tests)
	ok := "rules:\n- {id: keys, effect: redact, phase: result, conditions: [{field: output.text, operator: detect, values: [aws_access_key, jwt]}]}\n" +
		"- {id: rows, effect: deny, phase: result, when: {environments: [prod]}, conditions: [{field: output.structured.rows, operator: gt, value: 100}]}\n" +
		"- {id: leak, effect: deny, phase: call, conditions: [{field: input.content, operator: detect, value: private_key}]}\n"
	if err := k8sClient.Create(context.Background(), newPolicy(t, "good-result", ok)); err != nil {
		t.Fatalf("a valid policy with result rules: %v", err)
	}
}
