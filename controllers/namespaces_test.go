package controllers_test

import (
	"testing"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestNamespacesAreIsolated(t *testing.T) {
	a, b := testenv.Namespace(t, k8s, "tg-"), testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, a, b)
	pa := policy(a, "only-in-a", 1)
	create(t, pa)
	create(t, frozenAgent(a, "freeze", "agent-a", nil))
	create(t, policy(b, "only-in-b", 3))

	_, ba := testenv.WaitForBundle(t, k8s, a, bundle.DefaultConfigMapName, "a published", func(x engine.Bundle) bool { return len(x.Policies) == 1 && len(x.FrozenAgents) == 1 })
	cmB, bb := testenv.WaitForBundle(t, k8s, b, bundle.DefaultConfigMapName, "b published", func(x engine.Bundle) bool { return len(x.Policies) == 1 })
	if ba.Policies[0].ID != "only-in-a" || bb.Policies[0].ID != "only-in-b" || len(bb.FrozenAgents) != 0 {
		t.Fatalf("a has %v, b has %v and %d frozen agents", policyIDs(ba), policyIDs(bb), len(bb.FrozenAgents))
	}
	if ba.Revision != expectedRevision(t, a) || bb.Revision != expectedRevision(t, b) {
		t.Fatal("a namespace's bundle is not built from exactly its own objects")
	}

	// Emptying a leaves b's bundle untouched.
	remove(t, pa)
	remove(t, frozenAgent(a, "freeze", "agent-a", nil))
	testenv.Eventually(t, "a's bundle removed", func() (bool, string) {
		_, found := getBundleConfigMap(t, a)
		return !found, "still there"
	})
	if cm, _ := getBundleConfigMap(t, b); cm == nil || cm.ResourceVersion != cmB.ResourceVersion {
		t.Fatalf("b's bundle changed when a was emptied")
	}
}
