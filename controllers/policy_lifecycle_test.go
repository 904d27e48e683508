package controllers_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// expectedRevision is the revision bundle.BuildSources gives the
// namespace's objects, its labels (when the cluster has cluster-scoped
// objects) and the cluster-scoped objects as the API server holds them now:
// what the operator must have published.
func expectedRevision(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	var pl v1alpha1.PolicyList
	var fl v1alpha1.FrozenAgentList
	var el v1alpha1.PolicyExceptionList
	var cpl v1alpha1.ClusterPolicyList
	var cfl v1alpha1.ClusterFrozenAgentList
	var namespace corev1.Namespace
	for _, err := range []error{
		k8s.List(ctx, &pl, client.InNamespace(ns)), k8s.List(ctx, &fl, client.InNamespace(ns)),
		k8s.List(ctx, &el, client.InNamespace(ns)), k8s.List(ctx, &cpl), k8s.List(ctx, &cfl),
		k8s.Get(ctx, client.ObjectKey{Name: ns}, &namespace),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The labels go in once the cluster has a cluster-scoped object (the
	// suite's tests run one after the other, so that does not change under
	// a test that does not create one).
	labels := namespace.Labels
	if len(cpl.Items)+len(cfl.Items) == 0 {
		labels = nil
	}
	b, _ := bundle.BuildSources(bundle.Sources{Labels: labels, Policies: pl.Items, FrozenAgents: fl.Items,
		Exceptions: el.Items, ClusterPolicies: cpl.Items, ClusterFrozenAgents: cfl.Items}, time.Now())
	_, rev, err := engine.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func policyIDs(b engine.Bundle) []string {
	var ids []string
	for _, p := range b.Policies {
		ids = append(ids, p.ID)
	}
	return ids
}

func TestPolicyCreateUpdateDeletePublishesBundle(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)

	guard := policy(ns, "guard", 2)
	create(t, guard)
	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "guard published", func(b engine.Bundle) bool { return len(b.Policies) == 1 })
	if got, want := b.Revision, expectedRevision(t, ns); got != want {
		t.Fatalf("published revision %s, bundle.Build of the API objects gives %s", got, want)
	}
	if p := b.Policies[0]; p.ID != "guard" || p.Version != 1 || len(p.Rules) != 2 || p.DefaultEffect != "allow" ||
		p.Rules[1].ID != "r1" || p.Rules[1].Conditions[1].Operator != "contains" {
		t.Fatalf("published policy %+v", p)
	}
	st := waitForPolicyReady(t, ns, "guard", v1alpha1.ReasonPublished)
	if st.Status.BundleRevision != b.Revision || st.Status.RuleCount != 2 || st.Status.ObservedGeneration != 1 ||
		readyOf(st.Status.Conditions).Status != "True" {
		t.Fatalf("status %+v, want live in %s with 2 rules", st.Status, b.Revision)
	}
	rev1 := b.Revision

	// Update: a third rule and a higher priority make generation 2.
	patch := client.MergeFrom(st.DeepCopy())
	st.Spec.Rules = append(st.Spec.Rules, policy(ns, "x", 3).Spec.Rules[2])
	st.Spec.Priority = 10
	if err := k8s.Patch(context.Background(), st, patch); err != nil {
		t.Fatal(err)
	}
	_, b = testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "guard generation 2 published", func(b engine.Bundle) bool {
		return len(b.Policies) == 1 && b.Policies[0].Version == 2
	})
	if p := b.Policies[0]; len(p.Rules) != 3 || p.Priority != 10 || b.Revision == rev1 {
		t.Fatalf("after update: policy %+v, revision %s (was %s)", p, b.Revision, rev1)
	}
	if got, want := b.Revision, expectedRevision(t, ns); got != want {
		t.Fatalf("published revision %s, want %s", got, want)
	}
	st = waitForPolicyReady(t, ns, "guard", v1alpha1.ReasonPublished)
	if st.Status.BundleRevision != b.Revision || st.Status.RuleCount != 3 || st.Status.ObservedGeneration != 2 {
		t.Fatalf("status after update %+v", st.Status)
	}

	// A second policy and a freeze, then delete one object at a time.
	other := policy(ns, "other", 1)
	create(t, other)
	freeze := frozenAgent(ns, "freeze", "agent-7", nil)
	create(t, freeze)
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "other and freeze published", func(b engine.Bundle) bool {
		return len(b.Policies) == 2 && len(b.FrozenAgents) == 1
	})
	remove(t, guard)
	_, b = testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "guard gone", func(b engine.Bundle) bool {
		return len(b.Policies) == 1 && b.Policies[0].ID == "other"
	})
	if got, want := b.Revision, expectedRevision(t, ns); got != want {
		t.Fatalf("after delete: revision %s, want %s (policies %v)", got, want, policyIDs(b))
	}
	remove(t, other)
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "only the freeze left", func(b engine.Bundle) bool {
		return len(b.Policies) == 0 && len(b.FrozenAgents) == 1
	})

	// Last object gone: no bundle, so sidecars deny NO_POLICIES.
	remove(t, freeze)
	testenv.Eventually(t, "bundle ConfigMap removed", func() (bool, string) {
		_, found := getBundleConfigMap(t, ns)
		return !found, "ConfigMap still there"
	})
}
