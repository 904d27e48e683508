package controllers_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A ClusterPolicy's enforcement sums the sidecars of every namespace it
// selects, and names a Pod by its namespace.
func TestClusterPolicyEnforcedAcrossNamespaces(t *testing.T) {
	team := testenv.Namespace(t, k8s, "tg-") // a unique label value
	first, second := testenv.Namespace(t, k8s, "tg-enf-"), testenv.Namespace(t, k8s, "tg-enf-")
	labelNamespace(t, first, team)
	labelNamespace(t, second, team)
	startManager(t, controllers.Options{}, first, second)
	a, b := agentPod(t, first, "agent-a"), agentPod(t, second, "agent-b")
	cp := clusterPolicy(t, "no-rm-"+team, team, "rm")
	createCluster(t, cp)

	revisionIn := func(ns string) string {
		cm, _ := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the ClusterPolicy published",
			func(b engine.Bundle) bool { return hasClusterPolicy(b, cp.Name) })
		return cm.Annotations[v1alpha1.RevisionAnnotation]
	}
	writeLease(t, a, serving(revisionIn(first)), v1alpha1.SidecarLeaseDurationSeconds)
	enforced := func(reason, summary string, names ...string) {
		t.Helper()
		waitForClusterPolicy(t, cp.Name, fmt.Sprintf("Enforced %s %s", reason, summary), func(cp *v1alpha1.ClusterPolicy) bool {
			c := enforcedOf(cp.Status.Conditions)
			return c != nil && cp.Status.Enforcement != nil && c.Reason == reason && cp.Status.Enforcement.Summary == summary &&
				c.ObservedGeneration == cp.Generation && containsAll(c.Message, names...)
		})
	}
	enforced(v1alpha1.ReasonSidecarsUnreporting, "1/2", "Pod "+second+"/agent-b")
	writeLease(t, b, serving(revisionIn(second)), v1alpha1.SidecarLeaseDurationSeconds)
	enforced(v1alpha1.ReasonAllSidecarsCurrent, "2/2", "the 2 namespaces it selects")
	got := waitForClusterPolicy(t, cp.Name, "Ready", func(cp *v1alpha1.ClusterPolicy) bool {
		return readyIs(cp.Status.Conditions, metav1.ConditionTrue, v1alpha1.ReasonPublished)
	})
	if enforcedOf(got.Status.Conditions).Status != metav1.ConditionTrue {
		t.Fatalf("Enforced %+v", enforcedOf(got.Status.Conditions))
	}
	// A sidecar serving the first namespace's bundle in the second is
	// stale there: revisions are per namespace.
	writeLease(t, b, serving(revisionIn(first)), v1alpha1.SidecarLeaseDurationSeconds)
	enforced(v1alpha1.ReasonSidecarsStale, "1/2", "Pod "+second+"/agent-b")
}

// A ClusterFrozenAgent is enforced once every sidecar of the namespaces it
// selects names it in its Lease (their own ClusterFrozenAgent watch), even
// while they serve an older bundle.
func TestClusterFrozenAgentEnforcedByFreezeNames(t *testing.T) {
	team := testenv.Namespace(t, k8s, "tg-")
	first, second := testenv.Namespace(t, k8s, "tg-enf-"), testenv.Namespace(t, k8s, "tg-enf-")
	labelNamespace(t, first, team)
	labelNamespace(t, second, team)
	startManager(t, controllers.Options{}, first, second)
	a, b := agentPod(t, first, "agent-a"), agentPod(t, second, "agent-b")
	cf := clusterFrozenAgent("stop-bob-"+team, team, "bob", nil)
	createCluster(t, cf)
	name := v1alpha1.FreezeName("ClusterFrozenAgent", cf.Name)
	enforced := func(reason, summary string, names ...string) {
		t.Helper()
		waitForClusterFrozen(t, cf.Name, fmt.Sprintf("Enforced %s %s", reason, summary), func(cf *v1alpha1.ClusterFrozenAgent) bool {
			c := enforcedOf(cf.Status.Conditions)
			return c != nil && cf.Status.Enforcement != nil && c.Reason == reason && cf.Status.Enforcement.Summary == summary &&
				c.ObservedGeneration == cf.Generation && containsAll(c.Message, names...)
		})
	}
	writeLease(t, a, serving("older", name), v1alpha1.SidecarLeaseDurationSeconds)
	writeLease(t, b, serving("older"), v1alpha1.SidecarLeaseDurationSeconds)
	enforced(v1alpha1.ReasonSidecarsStale, "1/2", "Pod "+second+"/agent-b")
	writeLease(t, b, serving("older", name), v1alpha1.SidecarLeaseDurationSeconds)
	enforced(v1alpha1.ReasonAllSidecarsCurrent, "2/2")
}
