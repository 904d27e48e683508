package webhook

import (
	"context"
	"testing"
)

// TestRejectsMalformedCastToNumber (issue 28): the API server refuses a
// castToNumber that is not a boolean; the webhook (engine.CheckPolicy)
// refuses it on an operator it does not apply to, on a group, and with a
// value that is no number, at its field path. A correct one is admitted.
func TestRejectsMalformedCastToNumber(t *testing.T) {
	tests := []refusedCase{
		{"not a boolean", rule(`{field: kwargs.amount, operator: gt, value: 5, castToNumber: "yes"}`), schema,
			[]string{"spec.rules[0].conditions[0].castToNumber", "must be of type boolean"}},
		{"on contains", rule(`{field: kwargs.amount, operator: contains, value: "5", castToNumber: true}`), webhook,
			[]string{"spec.rules[0].conditions[0].castToNumber", "castToNumber applies only to eq, neq, in, not_in, gt, gte, lt and lte, not contains"}},
		{"on exists in all", rule(`{any: [{all: [{field: kwargs.amount, operator: exists, castToNumber: true}]}]}`), webhook,
			[]string{"spec.rules[0].conditions[0].any[0].all[0].castToNumber", "not exists"}},
		{"on a group", rule(`{any: [{field: kwargs.amount, operator: gt, value: 1}], castToNumber: true}`), webhook,
			[]string{"spec.rules[0].conditions[0].castToNumber", "castToNumber belongs on the group's tests"}},
		{"hex value", rule(`{field: kwargs.amount, operator: eq, value: "0x10", castToNumber: true}`), webhook,
			[]string{"spec.rules[0].conditions[0].value", `castToNumber: "0x10" is not a number`}},
		{"NaN among values", rule(`{field: kwargs.amount, operator: in, values: [1, " 2 ", "NaN"], castToNumber: true}`), webhook,
			[]string{"spec.rules[0].conditions[0].values[2]", `castToNumber: "NaN" is not a number`}},
		{"boolean value in any", rule(`{any: [{field: kwargs.amount, operator: lt, value: true, castToNumber: true}]}`), webhook,
			[]string{"spec.rules[0].conditions[0].any[0].value", "castToNumber: a boolean is not a number"}},
		{"out of range", rule(`{field: kwargs.amount, operator: gte, value: "1e400", castToNumber: true}`), webhook,
			[]string{"spec.rules[0].conditions[0].value", `castToNumber: "1e400" is not a number`}},
	}
	expectRefused(t, "bad-cast", tests)
	ok := rule(`{field: kwargs.amount, operator: gt, value: " +5e3 ", castToNumber: true}`) +
		"  - {field: kwargs.currency, operator: not_in, values: [840, \"978\"], castToNumber: true}\n"
	if err := k8sClient.Create(context.Background(), newPolicy(t, "good-cast", ok)); err != nil {
		t.Errorf("a correct castToNumber policy was refused: %v", err)
	}
}
