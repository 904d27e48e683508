package crdschema

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

// fields lists each error's field and type, sorted: the schema validator
// walks properties in map order.
func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+" "+e.Type.String())
	}
	slices.Sort(out)
	return out
}

func TestEveryKindIsServed(t *testing.T) {
	for _, kind := range []string{"Policy", "FrozenAgent", "Agent", "MCPUpstream"} {
		if gvk := v1alpha1.GroupVersion.WithKind(kind); !Known(gvk) {
			t.Errorf("%s is not served by the embedded CRDs", gvk)
		}
	}
	if Known(schema.GroupVersionKind{Group: "toolgate.dev", Version: "v1", Kind: "Policy"}) {
		t.Error("toolgate.dev/v1 is served, but no CRD has that version")
	}
}

// TestDecodeDefaultsFromTheCRD: the defaults are the CRD's, not a copy. The
// CRD has none for defaultEffect: the bundle builder fills it in, allow or
// deny by spec.evaluation.
func TestDecodeDefaultsFromTheCRD(t *testing.T) {
	u := object(t, `{apiVersion: toolgate.dev/v1alpha1, kind: Policy, metadata: {name: p}, spec: {rules: [{id: a, effect: allow}]}}`)
	unknown, err := Decode(u)
	if err != nil || len(unknown) > 0 {
		t.Fatalf("Decode: unknown %v, err %v", unknown, err)
	}
	_, hasEffect, _ := unstructured.NestedString(u.Object, "spec", "defaultEffect")
	priority, hasPriority, _ := unstructured.NestedInt64(u.Object, "spec", "priority")
	if hasEffect || !hasPriority || priority != 0 {
		t.Errorf("defaults: defaultEffect set %v, priority %d (set %v); want no defaultEffect, priority 0", hasEffect, priority, hasPriority)
	}
	u = object(t, `{apiVersion: toolgate.dev/v1alpha1, kind: Policy, metadata: {name: p}, spec: {defaultEffect: deny}}`)
	if err := Default(u); err != nil {
		t.Fatal(err)
	}
	if effect, _, _ := unstructured.NestedString(u.Object, "spec", "defaultEffect"); effect != "deny" {
		t.Errorf("Default overwrote defaultEffect: %q", effect)
	}
}

func TestDecodeReturnsAndPrunesUnknownFields(t *testing.T) {
	u := object(t, `{apiVersion: toolgate.dev/v1alpha1, kind: Policy, metadata: {name: p, colour: red},
spec: {rules: [{id: a, effect: allow, whenever: x, conditions: [{field: f, operator: exists, valu: 1}]}], extra: true}}`)
	unknown, err := Decode(u)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"metadata.colour", "spec.extra", "spec.rules[0].conditions[0].valu", "spec.rules[0].whenever"}
	if !slices.Equal(unknown, want) {
		t.Errorf("unknown fields %v, want %v", unknown, want)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "extra"); found {
		t.Error("spec.extra was not pruned")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"valid policy", `{apiVersion: toolgate.dev/v1alpha1, kind: Policy, metadata: {name: p, namespace: d},
spec: {rules: [{id: a, effect: allow, conditions: [{field: tool_name, operator: eq, value: Bash}]}]}}`, nil},
		{"schema, list map and metadata", `{apiVersion: toolgate.dev/v1alpha1, kind: Policy, metadata: {name: Bad_Name, namespace: d},
spec: {priority: x, rules: [{id: a, effect: allow, conditions: [{field: a..b, operator: like}]}, {id: a, effect: deny}]}}`,
			[]string{"<nil> Invalid value", "metadata.name Invalid value", "spec.priority Invalid value", "spec.rules[0].conditions[0].field Invalid value",
				"spec.rules[0].conditions[0].operator Unsupported value", "spec.rules[1] Duplicate value"}},
		{"status is dropped on create", `{apiVersion: toolgate.dev/v1alpha1, kind: Policy, metadata: {name: p, namespace: d},
spec: {rules: [{id: a, effect: allow}]}, status: {ruleCount: many}}`, nil},
		{"CEL rule", `{apiVersion: toolgate.dev/v1alpha1, kind: FrozenAgent, metadata: {name: f, namespace: d}, spec: {agentId: " a "}}`,
			[]string{"spec Invalid value"}},
		{"CEL rules skipped after a blocking error", `{apiVersion: toolgate.dev/v1alpha1, kind: FrozenAgent, metadata: {name: f, namespace: d}, spec: {agentId: " a ", reason: 5}}`,
			[]string{"<nil> Invalid value", "spec.reason Invalid value"}},
		{"agentId or serviceAccount", `{apiVersion: toolgate.dev/v1alpha1, kind: FrozenAgent, metadata: {name: f, namespace: d}, spec: {reason: r}}`,
			[]string{"spec Invalid value"}},
		{"a namespaced object needs its namespace", `{apiVersion: toolgate.dev/v1alpha1, kind: FrozenAgent, metadata: {name: f}, spec: {agentId: a}}`,
			[]string{"<nil> Invalid value", "metadata.namespace Required value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := object(t, tt.doc)
			if _, err := Decode(u); err != nil {
				t.Fatal(err)
			}
			if err := PrepareForCreate(u); err != nil {
				t.Fatal(err)
			}
			if _, found := u.Object["status"]; found {
				t.Error("status kept on create")
			}
			errs := Validate(context.Background(), u)
			if got := fields(errs); !slices.Equal(got, tt.want) {
				t.Errorf("errors %q, want %q\n%s", got, tt.want, errs.ToAggregate())
			}
		})
	}
}

func TestCELMessageIsTheCRDs(t *testing.T) {
	u := object(t, `{apiVersion: toolgate.dev/v1alpha1, kind: FrozenAgent, metadata: {name: f, namespace: d}, spec: {agentId: "a "}}`)
	errs := Validate(context.Background(), u)
	if len(errs) != 1 || !strings.Contains(errs[0].Detail, "agentId must not start or end with whitespace") {
		t.Errorf("errors %v", errs)
	}
}

func TestUnknownKind(t *testing.T) {
	u := object(t, `{apiVersion: toolgate.dev/v1alpha1, kind: Widget, metadata: {name: w}}`)
	if _, err := Decode(u); err == nil {
		t.Error("Decode of an unknown kind succeeded")
	}
	if errs := Validate(context.Background(), u); len(errs) != 1 || errs[0].Field != "kind" {
		t.Errorf("Validate of an unknown kind: %v", errs)
	}
}
