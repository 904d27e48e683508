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
		{"every agent", v1alpha1.FrozenAgentSpec{AllAgents: true, Reason: "incident"}, ""},
		{"every agent and an agent", v1alpha1.FrozenAgentSpec{AllAgents: true, AgentID: "a"}, "spec"},
		{"every agent and a service account", v1alpha1.FrozenAgentSpec{AllAgents: true, ServiceAccount: "billing-bot"}, "spec"},
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

// TestCheckFrozenAgentAllAgents: a freeze of every agent names no agent and
// no ServiceAccount, and says so; allAgents: false alone freezes nobody.
// Updates (allAgents is immutable) are checked against the real API server
// in freeze/ (TestAllAgentsIsImmutable): Check runs no transition rule.
func TestCheckFrozenAgentAllAgents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    v1alpha1.FrozenAgentSpec
		want string
	}{
		{"with agentId", v1alpha1.FrozenAgentSpec{AllAgents: true, AgentID: "a"}, "allAgents: true freezes every agent of the namespace: it takes no agentId or serviceAccount"},
		{"with serviceAccount", v1alpha1.FrozenAgentSpec{AllAgents: true, ServiceAccount: "billing-bot"}, "it takes no agentId or serviceAccount"},
		{"with both", v1alpha1.FrozenAgentSpec{AllAgents: true, AgentID: "a", ServiceAccount: "billing-bot"}, "it takes no agentId or serviceAccount"},
		{"nothing", v1alpha1.FrozenAgentSpec{Reason: "r"}, "agentId, serviceAccount or allAgents: true is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if errs := checkSpec(t, tc.f); len(errs) != 1 || errs[0].Field != "spec" || !strings.Contains(errs[0].Detail, tc.want) {
				t.Errorf("problems %v, want one at spec saying %q", errs, tc.want)
			}
		})
	}
	// allAgents: false, as a manifest may spell it (the typed spec omits
	// false): the same as no allAgents.
	u := object(t, `{apiVersion: toolgate.dev/v1alpha1, kind: FrozenAgent, metadata: {name: f, namespace: d}, spec: {allAgents: false}}`)
	if errs := Validate(context.Background(), u); len(errs) != 1 || !strings.Contains(errs[0].Detail, "agentId, serviceAccount or allAgents: true is required") {
		t.Errorf("allAgents: false alone: %v", errs)
	}
	u = object(t, `{apiVersion: toolgate.dev/v1alpha1, kind: FrozenAgent, metadata: {name: f, namespace: d}, spec: {allAgents: false, agentId: a}}`)
	if errs := Validate(context.Background(), u); len(errs) != 0 {
		t.Errorf("allAgents: false beside an agentId: %v", errs)
	}
}
