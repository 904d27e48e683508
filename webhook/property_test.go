package webhook

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// TestAcceptedPoliciesCompile is the property that matters for sidecars:
// whatever the API server admits (schema, CEL and webhook together), read
// back as stored, compiles in the engine with zero diagnostics. Random
// policies mix valid and invalid fields, operators, values and patterns.
func TestAcceptedPoliciesCompile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	// Mostly well-formed pieces, with a 1-in-12 chance of each kind of
	// mistake, so both admitted and rejected policies are common.
	fields := []any{"tool_name", "input.command", "kwargs.amount", "args.0", "agent_id"}
	badFields := []any{"", "a..b", "x.__proto__", "input.constructor", 5}
	ops := map[string][]any{
		"scalar": {"eq", "neq"}, "list": {"in", "not_in"},
		"string": {"contains", "not_contains", "starts_with", "ends_with", "matches"},
		"number": {"gt", "gte", "lt", "lte"}, "none": {"exists", "not_exists", "is_empty", "is_not_empty", "is_valid_json"},
	}
	kinds := []string{"scalar", "list", "string", "number", "none"}
	goodValues := map[string][]any{
		"scalar": {"Bash", 1000, true}, "list": {"Read", 7, false}, "number": {1000, 2.5, -1},
		"string": {"rm -rf", "^mcp__github__(create|delete)_", "^Bash$", "secret"},
	}
	badValues := []any{"(?=x)", `(a)\1`, "(", "[z-a]", map[string]any{"a": 1}, []any{1}, "x", 3}
	badOps := []any{"like", ""}
	ids := []any{"r", "rule-", "x"}
	badIDs := []any{"Bad_ID", ""}
	oops := func() bool { return rng.IntN(12) == 0 }

	accepted, rejected := 0, 0
	for i := range 150 {
		var rules []any
		for r := range 1 + rng.IntN(4) {
			var conds []any
			for range rng.IntN(4) {
				kind := kinds[rng.IntN(len(kinds))]
				c := map[string]any{"field": pick(rng, fields), "operator": pick(rng, ops[kind])}
				if oops() {
					c["field"] = pick(rng, badFields)
				}
				if oops() {
					c["operator"] = pick(rng, badOps)
				}
				value := func() any {
					if oops() || kind == "none" {
						return pick(rng, badValues)
					}
					return pick(rng, goodValues[kind])
				}
				switch {
				case kind == "none" && !oops():
				case kind == "list" && rng.IntN(3) > 0:
					c["values"] = []any{value(), value()}
				default:
					c["value"] = value()
				}
				conds = append(conds, c)
			}
			id := any(fmt.Sprintf("%s%d", pick(rng, ids), r))
			if oops() {
				id = pick(rng, badIDs)
			}
			effect := []string{"allow", "deny"}[rng.IntN(2)]
			if oops() {
				effect = "block"
			}
			rules = append(rules, map[string]any{"id": id, "effect": effect, "conditions": conds})
		}
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"rules": rules}}}
		u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Policy"))
		u.SetNamespace(ns)
		u.SetName(fmt.Sprintf("prop-%d", i))
		if err := k8sClient.Create(context.Background(), u); err != nil {
			rejected++
			continue
		}
		accepted++
		var stored v1alpha1.Policy
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(u), &stored); err != nil {
			t.Fatal(err)
		}
		if _, diags := engine.Compile(engine.Bundle{Policies: []engine.Policy{bundle.Policy(&stored)}}); len(diags) > 0 {
			t.Errorf("admitted policy %s does not compile: %v\nspec: %v", stored.Name, diags, u.Object["spec"])
		}
	}
	t.Logf("%d admitted, %d rejected", accepted, rejected)
	if accepted < 10 || rejected < 10 {
		t.Errorf("the generator must exercise both sides: %d admitted, %d rejected", accepted, rejected)
	}
}

func pick(rng *rand.Rand, xs []any) any { return xs[rng.IntN(len(xs))] }
