package controllers

import (
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// BenchmarkNamespaceBundle is the CPU a reconcile spends on one namespace
// before any API call: build, encode, compile for diagnostics, render.
func BenchmarkNamespaceBundle(b *testing.B) {
	for _, rules := range []int{100, 500, 2000} {
		policies := benchPolicies(rules)
		b.Run(fmt.Sprintf("rules=%d", rules), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bu := bundle.Build(policies, nil, time.Now())
				doc, rev, err := engine.Encode(bu)
				if err != nil {
					b.Fatal(err)
				}
				if _, diags := engine.Compile(bu); len(diags) != 0 {
					b.Fatal(diags)
				}
				if _, err := renderPayload(doc, rev, DefaultCompressAbove, DefaultMaxStoredBytes, 0, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchPolicies spreads rules over Policies of at most 100 rules.
func benchPolicies(rules int) []v1alpha1.Policy {
	var out []v1alpha1.Policy
	for i := 0; i < rules; i += 100 {
		p := v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Generation: 1}}
		for j := i; j < min(i+100, rules); j++ {
			p.Spec.Rules = append(p.Spec.Rules, v1alpha1.Rule{ID: fmt.Sprintf("r%d", j), Effect: v1alpha1.RuleDeny,
				Description: "no danger",
				Conditions: []v1alpha1.Condition{
					{Field: "tool_name", Operator: "eq", Value: &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `"tool_%d"`, j)}},
					{Field: "input.command", Operator: "contains", Value: &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `"danger_%d"`, j)}},
				}})
		}
		out = append(out, p)
	}
	return out
}
