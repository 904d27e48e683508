package controllers_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

func hasFrozen(b engine.Bundle, agent string) bool {
	for _, f := range b.FrozenAgents {
		if f.ID == agent {
			return true
		}
	}
	return false
}

func TestFrozenAgentIsPublishedAndLeavesAtExpiry(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)
	create(t, policy(ns, "base", 1))

	// Created first, so any bundle with the later freezes has seen it.
	past := time.Now().Add(-time.Hour)
	create(t, frozenAgent(ns, "freeze-old", "old", &past))
	// expiresAt has one-second precision in the API. Ten seconds leaves room
	// for a loaded CI machine to publish bob before his freeze ends.
	expiry := time.Now().Add(10 * time.Second).Truncate(time.Second)
	create(t, frozenAgent(ns, "freeze-bob", "bob", &expiry))
	create(t, frozenAgent(ns, "freeze-eve", "eve", nil))

	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "bob and eve frozen", func(b engine.Bundle) bool {
		return hasFrozen(b, "bob") && hasFrozen(b, "eve")
	})
	if hasFrozen(b, "old") {
		t.Fatal("a freeze that expired before it was created was published")
	}
	c, _ := engine.Compile(b)
	before := func() time.Time { return expiry.Add(-time.Second) }
	if r := c.Evaluate(engine.Request{"tool_name": "tool_9", "agent_id": "BOB"}, engine.EvalOptions{Now: before}); r.Code != engine.CodeAgentFrozen {
		t.Fatalf("published bundle decides %+v for bob, want AGENT_FROZEN", r)
	}
	bob := waitForFrozenReady(t, ns, "freeze-bob", v1alpha1.ReasonPublished)
	if bob.Status.BundleRevision == "" || bob.Status.ObservedGeneration != bob.Generation {
		t.Fatalf("bob's status %+v", bob.Status)
	}
	old := waitForFrozenReady(t, ns, "freeze-old", v1alpha1.ReasonExpired)
	if old.Status.BundleRevision != "" {
		t.Fatalf("an expired freeze claims to be live in %s", old.Status.BundleRevision)
	}

	// No event arrives at expiry: only the requeue the controller asked for.
	_, b = testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "bob's freeze expired", func(b engine.Bundle) bool { return !hasFrozen(b, "bob") })
	if seen := time.Now(); seen.Before(expiry) {
		t.Fatalf("bob left the bundle at %s, before expiresAt %s", seen, expiry)
	}
	if !hasFrozen(b, "eve") {
		t.Fatal("eve's freeze, which has no expiry, left the bundle")
	}
	bob = waitForFrozenReady(t, ns, "freeze-bob", v1alpha1.ReasonExpired)
	if r := readyOf(bob.Status.Conditions); r.Status != metav1.ConditionFalse || bob.Status.BundleRevision != "" {
		t.Fatalf("bob after expiry: %+v", bob.Status)
	}
	waitForEvent(t, ns, "freeze-bob", "Normal", v1alpha1.ReasonExpired)
	// eve did not change: her status still names the revision her freeze
	// went live in, which b (without bob) carries on.
	eve := waitForFrozenReady(t, ns, "freeze-eve", v1alpha1.ReasonPublished)
	if eve.Status.BundleRevision == "" || eve.Status.BundleRevision == b.Revision {
		t.Fatalf("eve live in %q after bob's expiry (bundle %s): want the revision before, unchanged", eve.Status.BundleRevision, b.Revision)
	}
}

// The controller's clock is injectable: with it two hours ahead, a freeze
// that expires in one hour has already ended.
func TestInjectedClockDecidesExpiry(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}, ns)
	create(t, policy(ns, "base", 1))
	inAnHour := time.Now().Add(time.Hour)
	create(t, frozenAgent(ns, "freeze-later", "later", &inAnHour))
	// Expired is written from a publish that considered the freeze.
	waitForFrozenReady(t, ns, "freeze-later", v1alpha1.ReasonExpired)
	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "published", func(b engine.Bundle) bool { return len(b.Policies) == 1 })
	if hasFrozen(b, "later") {
		t.Fatal("a freeze past its expiry by the controller's clock was published")
	}
}
