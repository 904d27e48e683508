package controllers_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// These tests write the bundle ConfigMap as an attacker would where the
// chart's admission policy is missing (or before it applies): as a user
// allowed to write ConfigMaps. The operator must take the channel back.

// allowEverything is a bundle a forger would write: one policy, no rules,
// default allow.
func allowEverything(t *testing.T) (doc []byte, revision string) {
	t.Helper()
	doc, revision, err := engine.Encode(engine.Bundle{Policies: []engine.Policy{{ID: "forged", Version: 1, DefaultEffect: "allow"}}})
	if err != nil {
		t.Fatal(err)
	}
	return doc, revision
}

func forgedConfigMap(t *testing.T, ns string) *corev1.ConfigMap {
	doc, rev := allowEverything(t)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bundle.DefaultConfigMapName,
			Annotations: map[string]string{v1alpha1.RevisionAnnotation: rev}},
		Data: map[string]string{bundle.Key: string(doc)},
	}
}

func hasPolicy(b engine.Bundle, id string) bool {
	for _, p := range b.Policies {
		if p.ID == id {
			return true
		}
	}
	return false
}

// TestAttackImmutableBundleIsRecreated: a bundle rewritten with immutable:
// true can never be updated again. Before, every later publish failed as
// Invalid, forever, and the forged content stayed; now the operator deletes
// it and publishes anew, and later changes still reach the namespace.
func TestAttackImmutableBundleIsRecreated(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)
	b := settled(t, ns)

	cm, _ := getBundleConfigMap(t, ns)
	forged := forgedConfigMap(t, ns)
	cm.Data, cm.Annotations, cm.Immutable = forged.Data, forged.Annotations, ptr.To(true)
	if err := k8s.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the pinned bundle replaced", func() (bool, string) {
		now, found := getBundleConfigMap(t, ns)
		if !found {
			return false, "gone"
		}
		got, err := testenv.DecodeBundle(now)
		if err != nil {
			return false, err.Error()
		}
		return now.UID != cm.UID && now.Immutable == nil && got.Revision == b.Revision,
			"revision " + got.Revision + ", uid " + string(now.UID)
	})
	create(t, policy(ns, "after-the-pin", 1))
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "a later Policy published", func(b engine.Bundle) bool { return hasPolicy(b, "after-the-pin") })
	waitForPolicyReady(t, ns, "after-the-pin", v1alpha1.ReasonPublished)
}

// TestAttackUnlabelledBundleIsAdopted: in a namespace with no Policy and no
// FrozenAgent, sidecars must deny NO_POLICIES. Before, a toolgate-bundle
// created without the bundle label was invisible to the operator's
// label-filtered cache and served as is; now it is found by name and
// removed. Where there is something to publish, it is overwritten.
func TestAttackUnlabelledBundleIsAdopted(t *testing.T) {
	empty, busy := testenv.Namespace(t, k8s, "tg-"), testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, empty, busy)

	create(t, forgedConfigMap(t, empty))
	testenv.Eventually(t, "the forged bundle of an empty namespace removed", func() (bool, string) {
		_, found := getBundleConfigMap(t, empty)
		return !found, "still there"
	})

	create(t, forgedConfigMap(t, busy))
	create(t, policy(busy, "real", 1))
	_, b := testenv.WaitForBundle(t, k8s, busy, bundle.DefaultConfigMapName, "the forged bundle overwritten", func(b engine.Bundle) bool { return hasPolicy(b, "real") })
	if hasPolicy(b, "forged") {
		t.Fatal("the forged policy survived the publish")
	}
}

// TestAttackTooLargeDoesNotRepublishForgedPolicies: while a namespace's
// policies are BundleTooLarge, the operator republishes the last bundle to
// carry freezes. Before, it took that bundle from the ConfigMap, so a
// forged one became its own; now it takes what it last published itself.
func TestAttackTooLargeDoesNotRepublishForgedPolicies(t *testing.T) {
	ns, before := tooLargeNamespace(t)

	cm, _ := getBundleConfigMap(t, ns)
	forged := forgedConfigMap(t, ns)
	cm.Data, cm.BinaryData, cm.Annotations = forged.Data, nil, forged.Annotations
	if err := k8s.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the last published policies back", func(b engine.Bundle) bool {
		return b.Revision == before.Revision
	})
	create(t, frozenAgent(ns, "stop-agent-7", "agent-7", nil))
	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the freeze published", func(b engine.Bundle) bool { return len(b.FrozenAgents) == 1 })
	if hasPolicy(b, "forged") || !hasPolicy(b, "small") || !hasPolicy(b, "noise-a") {
		t.Fatalf("the freeze was published on %d policies, not the last published small and noise-a", len(b.Policies))
	}
}

// TestAttackTooLargeAfterRestartDoesNotRepublishForgedPolicies: a manager
// that restarts while the namespace is BundleTooLarge has published nothing
// yet to build on. A freeze must still go out at once, and not on top of
// what the ConfigMap holds: it goes out alone (the other agents are denied
// NO_POLICIES, failing closed) until the policies fit again.
func TestAttackTooLargeAfterRestartDoesNotRepublishForgedPolicies(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	first := startManager(t, controllers.Options{MaxParts: 1}, ns)
	create(t, policy(ns, "small", 1))
	create(t, bigPolicy(ns, "noise-a", 900, true))
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "two policies published", func(b engine.Bundle) bool { return len(b.Policies) == 2 })
	create(t, bigPolicy(ns, "noise-b", 900, true))
	waitForPolicyReady(t, ns, "noise-b", v1alpha1.ReasonBundleTooLarge)
	first.stop()

	cm, _ := getBundleConfigMap(t, ns)
	forged := forgedConfigMap(t, ns)
	cm.Data, cm.BinaryData, cm.Annotations = forged.Data, nil, forged.Annotations
	if err := k8s.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	startManager(t, controllers.Options{MaxParts: 1}, ns)
	create(t, frozenAgent(ns, "stop-agent-7", "agent-7", nil))
	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the freeze published", func(b engine.Bundle) bool { return len(b.FrozenAgents) == 1 })
	if hasPolicy(b, "forged") || len(b.Policies) != 0 {
		t.Fatalf("after a restart, the freeze was published on %d policies from the ConfigMap", len(b.Policies))
	}
	f := waitForFrozenReady(t, ns, "stop-agent-7", v1alpha1.ReasonPublished)
	if msg := readyOf(f.Status.Conditions).Message; !strings.Contains(msg, "without policies") {
		t.Errorf("the FrozenAgent does not say its bundle carries no policies: %q", msg)
	}
}
