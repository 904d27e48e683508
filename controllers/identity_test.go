package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAgentsUpstreamsAndNamespaceLabelsArePublished: a namespace's Agents
// and MCPUpstreams (URLs, never credentials) and its environment label go
// into its signed bundle, a label change re-publishes it, and of two
// Agents for one ServiceAccount the older is the agent while the other is
// Ready=False Conflict with a Warning event, until the older goes.
func TestAgentsUpstreamsAndNamespaceLabelsArePublished(t *testing.T) {
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s, "tg-id-")
	startManager(t, controllers.Options{}, ns)
	create(t, policy(ns, "base", 1))
	create(t, &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing"},
		Spec: v1alpha1.AgentSpec{ServiceAccountName: "billing-bot", AgentID: "billing-bot-7", Roles: []string{"reader"}, Upstreams: []string{"github"}}})
	create(t, &v1alpha1.MCPUpstream{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "github"},
		Spec: v1alpha1.MCPUpstreamSpec{URL: "https://mcp.example/github", CredentialSecretRef: &v1alpha1.SecretKeyRef{Name: "github-token"}}})

	cm, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the Agent and the MCPUpstream published", func(b engine.Bundle) bool {
		return b.Identity != nil && len(b.Identity.Agents) == 1 && len(b.Identity.Upstreams) == 1
	})
	if a := b.Identity.Agents[0]; a.ServiceAccount != "billing-bot" || a.ID != "billing-bot-7" || len(a.Roles) != 1 || a.Roles[0] != "reader" || a.Upstreams[0] != "github" {
		t.Errorf("published Agent %+v", a)
	}
	if u := b.Identity.Upstreams[0]; u.Name != "github" || u.URL != "https://mcp.example/github" {
		t.Errorf("published upstream %+v", u)
	}
	for k, v := range cm.Data {
		if strings.Contains(v, "github-token") {
			t.Errorf("the bundle ConfigMap's %s names the credential Secret", k)
		}
	}
	if b.Identity.Environment != "" {
		t.Errorf("environment %q before the namespace is labelled", b.Identity.Environment)
	}

	var nsObj corev1.Namespace
	if err := k8s.Get(ctx, types.NamespacedName{Name: ns}, &nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[v1alpha1.LabelEnvironment] = "prod"
	if err := k8s.Update(ctx, &nsObj); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the namespace's environment label published", func(b engine.Bundle) bool {
		return b.Identity != nil && b.Identity.Environment == "prod"
	})
	waitForIdentityReady(t, ns, &v1alpha1.Agent{}, "billing", v1alpha1.ReasonPublished)
	waitForIdentityReady(t, ns, &v1alpha1.MCPUpstream{}, "github", v1alpha1.ReasonPublished)

	// A second Agent for the same ServiceAccount takes nothing away.
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second precision: the second Agent must be younger
	create(t, &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "impostor"},
		Spec: v1alpha1.AgentSpec{ServiceAccountName: "billing-bot", Roles: []string{"payments"}}})
	impostor := waitForIdentityReady(t, ns, &v1alpha1.Agent{}, "impostor", v1alpha1.ReasonConflict).(*v1alpha1.Agent)
	if c := readyOf(impostor.Status.Conditions); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `"billing"`) {
		t.Errorf("impostor's Ready %+v, want False naming billing", c)
	}
	waitForEvent(t, ns, "impostor", "Warning", v1alpha1.ReasonConflict)
	_, b = testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the bundle after the conflict", func(b engine.Bundle) bool { return b.Identity != nil })
	if a, ok := b.Identity.AgentFor("billing-bot"); !ok || a.Name != "billing" {
		t.Errorf("billing-bot is %+v %v, want the older Agent billing", a, ok)
	}

	// The older one deleted, the other is the agent.
	remove(t, &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing"}})
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "impostor registered once billing is gone", func(b engine.Bundle) bool {
		a, ok := b.Identity.AgentFor("billing-bot")
		return ok && a.Name == "impostor"
	})
	waitForIdentityReady(t, ns, &v1alpha1.Agent{}, "impostor", v1alpha1.ReasonPublished)
}

// waitForIdentityReady waits for an Agent's or MCPUpstream's Ready reason
// on its current generation, and returns the object.
func waitForIdentityReady(t *testing.T, ns string, obj client.Object, name, reason string) client.Object {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%T %s Ready reason %s", obj, name, reason), func() (bool, string) {
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
			return false, err.Error()
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *v1alpha1.Agent:
			conds = o.Status.Conditions
		case *v1alpha1.MCPUpstream:
			conds = o.Status.Conditions
		}
		c := readyOf(conds)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason && c.ObservedGeneration == obj.GetGeneration(), fmt.Sprintf("Ready=%s reason %s", c.Status, c.Reason)
	})
	return obj
}
