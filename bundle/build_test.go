package bundle

import (
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

func policy(name string, gen int64, prio int32, rules ...v1alpha1.Rule) v1alpha1.Policy {
	p := v1alpha1.Policy{Spec: v1alpha1.PolicySpec{Priority: prio, Rules: rules}}
	p.Name, p.Generation = name, gen
	return p
}

func TestBuildConvertsAndOrders(t *testing.T) {
	t.Parallel()
	rule := v1alpha1.Rule{ID: "r", Effect: v1alpha1.RuleDeny, Conditions: []v1alpha1.Condition{
		{Field: "kwargs.amount", Operator: "gt", Value: &apiextensionsv1.JSON{Raw: []byte("1000")}},
		{Field: "tool_name", Operator: "in", Values: []apiextensionsv1.JSON{{Raw: []byte(`"pay"`)}, {Raw: []byte(`"transfer"`)}}},
	}}
	b := Build([]v1alpha1.Policy{policy("b", 3, 0, rule), policy("a", 0, 0, rule), policy("z", 1, 5, rule)}, nil, time.Time{})
	var ids []string
	for _, p := range b.Policies {
		ids = append(ids, p.ID)
	}
	if want := []string{"z", "a", "b"}; !slices.Equal(ids, want) {
		t.Errorf("order %v, want %v (priority desc, then name)", ids, want)
	}
	a := b.Policies[1]
	if a.Version != 1 {
		t.Errorf("unset generation gives version %d, want 1", a.Version)
	}
	if a.DefaultEffect != "allow" {
		t.Errorf("unset defaultEffect of an ordered policy gives %q, want allow", a.DefaultEffect)
	}
	if b.Policies[2].Version != 3 {
		t.Errorf("version %d, want generation 3", b.Policies[2].Version)
	}
	c := a.Rules[0].Conditions
	if string(c[0].Value) != "1000" || len(c[1].Values) != 2 || string(c[1].Values[1]) != `"transfer"` {
		t.Errorf("conditions not carried over: %+v", c)
	}
	if b.SchemaVersion != engine.SchemaVersionOrdered || b.FrozenAgents == nil {
		t.Errorf("schema version %d, frozen %v", b.SchemaVersion, b.FrozenAgents)
	}
}

func TestBuildDropsExpiredFreezes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	freeze := func(id string, exp *time.Time) v1alpha1.FrozenAgent {
		f := v1alpha1.FrozenAgent{Spec: v1alpha1.FrozenAgentSpec{AgentID: id, Reason: "why"}}
		if exp != nil {
			f.Spec.ExpiresAt = &metav1.Time{Time: *exp}
		}
		return f
	}
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	frozen := []v1alpha1.FrozenAgent{freeze("gone", &past), freeze("at", &now), freeze("later", &future), freeze("forever", nil)}

	var got []string
	for _, f := range Build(nil, frozen, now).FrozenAgents {
		got = append(got, f.ID)
	}
	if want := []string{"forever", "later"}; !slices.Equal(got, want) {
		t.Errorf("frozen at now: %v, want %v", got, want)
	}
	if n := len(Build(nil, frozen, time.Time{}).FrozenAgents); n != 4 {
		t.Errorf("a zero now keeps every freeze, got %d", n)
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	t.Parallel()
	r := v1alpha1.Rule{ID: "r", Effect: v1alpha1.RuleAllow}
	x := []v1alpha1.Policy{policy("a", 1, 1, r), policy("b", 1, 1, r), policy("c", 1, 2, r)}
	y := []v1alpha1.Policy{x[2], x[0], x[1]}
	dx, rx, err := engine.Encode(Build(x, nil, time.Time{}))
	if err != nil {
		t.Fatal(err)
	}
	dy, ry, err := engine.Encode(Build(y, nil, time.Time{}))
	if err != nil {
		t.Fatal(err)
	}
	if rx != ry || string(dx) != string(dy) {
		t.Errorf("input order changed the bundle: %s vs %s", rx, ry)
	}
}

// TestCRDOperatorEnumMatchesEngine keeps the CRD schema's operator enum (from
// the kubebuilder marker) and the engine's operator table in step.
func TestCRDOperatorEnumMatchesEngine(t *testing.T) {
	t.Parallel()
	schema := policyCRD(t).Schema.OpenAPIV3Schema
	cond := schema.Properties["spec"].Properties["rules"].Items.Schema.Properties["conditions"].Items.Schema
	if enum := enumOf(cond.Properties["operator"]); !slices.Equal(enum, engine.Operators) {
		t.Errorf("CRD operator enum %v\nengine operators   %v", enum, engine.Operators)
	}
}
