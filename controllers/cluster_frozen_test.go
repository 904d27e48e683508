package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

func clusterFrozenAgent(name, team, agent string, expiresAt *time.Time) *v1alpha1.ClusterFrozenAgent {
	f := &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterFrozenAgentSpec{FrozenAgentSpec: v1alpha1.FrozenAgentSpec{AgentID: agent, Reason: "INC-9"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{testLabel: team}}}}
	if expiresAt != nil {
		mt := metav1.NewTime(*expiresAt)
		f.Spec.ExpiresAt = &mt
	}
	return f
}

func waitForClusterFrozen(t *testing.T, name, what string, ok func(*v1alpha1.ClusterFrozenAgent) bool) *v1alpha1.ClusterFrozenAgent {
	t.Helper()
	var f v1alpha1.ClusterFrozenAgent
	testenv.Eventually(t, "ClusterFrozenAgent "+name+" "+what, func() (bool, string) {
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, &f); err != nil {
			return false, err.Error()
		}
		return ok(&f), fmt.Sprintf("status %+v", f.Status)
	})
	return &f
}

// The operator compiles a ClusterFrozenAgent into the bundle of every
// namespace it selects, one with nothing of its own included, and says in
// how many it is live; one already expired is published nowhere and says
// Expired, with an Event.
func TestClusterFrozenAgentIsPublishedWhereItSelects(t *testing.T) {
	team := testenv.Namespace(t, k8s, "tg-")
	a, b, other := testenv.Namespace(t, k8s, "tg-"), testenv.Namespace(t, k8s, "tg-"), testenv.Namespace(t, k8s, "tg-")
	labelNamespace(t, a, team)
	labelNamespace(t, b, team)
	startManager(t, controllers.Options{}, a, b, other)
	create(t, policy(a, "base", 1))
	create(t, policy(other, "base", 1))
	past := time.Now().Add(-time.Hour)
	old := clusterFrozenAgent("old-"+team, team, "old", &past)
	createCluster(t, old)
	freeze := clusterFrozenAgent("freeze-"+team, team, "bob", nil)
	createCluster(t, freeze)

	for _, ns := range []string{a, b} {
		_, got := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "bob frozen in "+ns, func(x engine.Bundle) bool { return hasFrozen(x, "bob") })
		if hasFrozen(got, "old") {
			t.Errorf("%s: an expired ClusterFrozenAgent was published", ns)
		}
		c, _ := engine.Compile(got)
		if r := c.Evaluate(engine.Request{"tool_name": "ls", "agent_id": "bob"}, engine.EvalOptions{}); r.Code != engine.CodeAgentFrozen {
			t.Errorf("%s decides %+v for bob, want AGENT_FROZEN", ns, r)
		}
	}
	_, ob := testenv.WaitForBundle(t, k8s, other, bundle.DefaultConfigMapName, "unselected namespace published", nil)
	if hasFrozen(ob, "bob") {
		t.Error("an unselected namespace froze bob")
	}
	got := waitForClusterFrozen(t, freeze.Name, "Ready in 2 namespaces", func(f *v1alpha1.ClusterFrozenAgent) bool {
		return readyIs(f.Status.Conditions, metav1.ConditionTrue, v1alpha1.ReasonPublished) && f.Status.Namespaces == 2
	})
	if msg := readyOf(got.Status.Conditions).Message; !containsAll(msg, "bob", "AGENT_FROZEN") {
		t.Errorf("message %q", msg)
	}
	waitForClusterFrozen(t, old.Name, "Expired", func(f *v1alpha1.ClusterFrozenAgent) bool {
		return readyIs(f.Status.Conditions, metav1.ConditionFalse, v1alpha1.ReasonExpired)
	})
	waitForEvent(t, "default", old.Name, "Normal", v1alpha1.ReasonExpired)
}
