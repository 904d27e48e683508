package webhook

import (
	"fmt"
	"testing"
)

// TestRejectsMalformedLimitStores (issue 30): the API server's schema and
// CEL rule refuse an unknown store or scope and failOpen without store:
// shared, so they hold with the webhook down; the engine says the same
// (engine.CheckPolicy, TestSharedLimitFieldsAreChecked) for bundles built
// outside the cluster.
func TestRejectsMalformedLimitStores(t *testing.T) {
	when := func(w string) string { return "rules:\n- id: r1\n  effect: deny\n  when: " + w + "\n" }
	expectRefused(t, "bad-limit-store", []refusedCase{
		{"failOpen without a store", when(`{rateLimit: {max: 1, window: 1m, failOpen: true}}`), schema,
			[]string{"spec.rules[0].when.rateLimit.failOpen", "failOpen is only for store: shared"}},
		{"failOpen with store local", when(`{tokenBudget: {max: 1, window: 1h, store: local, failOpen: true}}`), schema,
			[]string{"spec.rules[0].when.tokenBudget.failOpen", "failOpen is only for store: shared"}},
		{"unknown store", when(`{rateLimit: {max: 1, window: 1m, store: redis}}`), schema,
			[]string{"spec.rules[0].when.rateLimit.store", `Unsupported value: "redis"`, `"local", "shared"`}},
		{"store in capitals", when(`{rateLimit: {max: 1, window: 1m, store: Shared}}`), schema,
			[]string{"spec.rules[0].when.rateLimit.store", `Unsupported value: "Shared"`}},
		{"per pod", when(`{tokenBudget: {max: 1, window: 1h, per: pod, store: shared}}`), schema,
			[]string{"spec.rules[0].when.tokenBudget.per", `Unsupported value: "pod"`, `"namespace"`}},
	})
}

// TestSharedLimitsAreAdmittedWithTheirWarnings: valid shared and
// per-namespace limits are stored; failOpen and a per-namespace limit
// counted per sidecar come back as admission warnings naming their field.
func TestSharedLimitsAreAdmittedWithTheirWarnings(t *testing.T) {
	tests := []struct {
		name, spec string
		want       []string
	}{
		{"shared per namespace", "rules:\n- {id: r1, effect: deny, when: {rateLimit: {max: 10, window: 1m, per: namespace, store: shared}}}\n", nil},
		{"shared per session, store written out", "rules:\n- {id: r1, effect: deny, when: {tokenBudget: {max: 10, window: 1h, per: session, store: shared}}}\n", nil},
		{"failOpen", "rules:\n- {id: r1, effect: deny, when: {rateLimit: {max: 10, window: 1m, store: shared, failOpen: true}}}\n",
			[]string{"spec.rules[0].when.rateLimit.failOpen: ", "failOpen lets calls through uncounted while the usage store is down"}},
		{"per namespace, local", "rules:\n- {id: r1, effect: deny, when: {rateLimit: {max: 10, window: 1m, per: namespace}}}\n",
			[]string{"spec.rules[0].when.rateLimit.per: ", "with N replicas the namespace may make N x max calls"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admittedWarning(t, fmt.Sprintf("limit-store-%d", i), tt.spec, tt.want)
		})
	}
}
