package crdschema

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// checkSpec is what the API server refuses in a FrozenAgent's spec on
// create (what `toolgate freeze` checks before it creates one).
func checkSpec(t *testing.T, spec v1alpha1.FrozenAgentSpec) field.ErrorList {
	t.Helper()
	errs, err := Check(context.Background(), &v1alpha1.FrozenAgent{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "FrozenAgent"},
		ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "default"},
		Spec:       spec,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out field.ErrorList
	for _, e := range errs {
		if e.Field == "spec" || strings.HasPrefix(e.Field, "spec.") {
			out = append(out, e)
		}
	}
	return out
}

// TestCheckFrozenAgent: each mistake is one problem, at its field (the
// cases engine.CheckFrozenAgent had, the schema's now alone).
func TestCheckFrozenAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		f     v1alpha1.FrozenAgentSpec
		field string
	}{
		{"valid", v1alpha1.FrozenAgentSpec{AgentID: "agent-1", Reason: "incident"}, ""},
		{"no id and no service account", v1alpha1.FrozenAgentSpec{}, "spec"},
		{"service account only", v1alpha1.FrozenAgentSpec{ServiceAccount: "billing-bot"}, ""},
		{"both", v1alpha1.FrozenAgentSpec{AgentID: "a", ServiceAccount: "billing-bot"}, ""},
		{"bad service account", v1alpha1.FrozenAgentSpec{ServiceAccount: "Billing Bot"}, "spec.serviceAccount"},
		{"long service account", v1alpha1.FrozenAgentSpec{ServiceAccount: strings.Repeat("a", v1alpha1.MaxServiceAccountLength+1)}, "spec.serviceAccount"},
		{"long id", v1alpha1.FrozenAgentSpec{AgentID: strings.Repeat("a", v1alpha1.MaxAgentIDLength+1)}, "spec.agentId"},
		{"long reason", v1alpha1.FrozenAgentSpec{AgentID: "a", Reason: strings.Repeat("r", v1alpha1.MaxReasonLength+1)}, "spec.reason"},
		{"limits are inclusive", v1alpha1.FrozenAgentSpec{AgentID: strings.Repeat("a", v1alpha1.MaxAgentIDLength),
			ServiceAccount: strings.Repeat("a", v1alpha1.MaxServiceAccountLength), Reason: strings.Repeat("r", v1alpha1.MaxReasonLength)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := checkSpec(t, tc.f)
			switch {
			case tc.field == "" && len(errs) > 0:
				t.Errorf("unexpected problems: %v", errs)
			case tc.field != "" && (len(errs) != 1 || errs[0].Field != tc.field):
				t.Errorf("problems %v, want one for %s", errs, tc.field)
			}
		})
	}
}

func TestCheckFrozenAgentWhitespace(t *testing.T) {
	t.Parallel()
	for _, id := range []string{" agent", "agent\t", "\u00a0agent"} {
		if errs := checkSpec(t, v1alpha1.FrozenAgentSpec{AgentID: id}); len(errs) != 1 || !strings.Contains(errs[0].Detail, "whitespace") {
			t.Errorf("%q: %v", id, errs)
		}
	}
	if errs := checkSpec(t, v1alpha1.FrozenAgentSpec{AgentID: "agent one"}); len(errs) != 0 {
		t.Errorf("inner spaces are fine: %v", errs)
	}
}

// The length limits count characters, not bytes: a multi-byte agentId and
// reason within them pass, one character more does not.
func TestFrozenAgentLengthLimitsCountCharacters(t *testing.T) {
	t.Parallel()
	if errs := checkSpec(t, v1alpha1.FrozenAgentSpec{AgentID: strings.Repeat("é", v1alpha1.MaxAgentIDLength), Reason: strings.Repeat("ü", v1alpha1.MaxReasonLength)}); len(errs) != 0 {
		t.Errorf("multi-byte agentId and reason within the limits: %v", errs)
	}
	if errs := checkSpec(t, v1alpha1.FrozenAgentSpec{AgentID: strings.Repeat("é", v1alpha1.MaxAgentIDLength+1)}); len(errs) != 1 {
		t.Errorf("agentId over the limit: %v", errs)
	}
}
