package controllers_test

import (
	"context"
	"slices"
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

func exception(ns, name string, kind v1alpha1.PolicyKind, policy string, expiresAt time.Time) *v1alpha1.PolicyException {
	return &v1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PolicyExceptionSpec{PolicyRef: v1alpha1.PolicyReference{Kind: kind, Name: policy},
			RuleIDs: []string{"r0"}, Agents: v1alpha1.ExceptionAgents{AgentIDs: []string{"migrator"}},
			ExpiresAt: metav1.NewTime(expiresAt), Justification: "INC-7: the migration needs it until Friday"}}
}

func exceptionNames(b engine.Bundle) []string {
	var names []string
	for _, e := range b.Exceptions {
		names = append(names, e.Name)
	}
	return names
}

func waitForException(t *testing.T, ns, name, reason string) *v1alpha1.PolicyException {
	t.Helper()
	var pe v1alpha1.PolicyException
	testenv.Eventually(t, "PolicyException "+name+" Ready reason "+reason, func() (bool, string) {
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &pe); err != nil {
			return false, err.Error()
		}
		c := readyOf(pe.Status.Conditions)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason && pe.Status.ObservedGeneration == pe.Generation, string(c.Status) + " " + c.Reason + ": " + c.Message
	})
	return &pe
}

// A PolicyException is compiled into its namespace's bundle while in force
// (Ready=True Applied, with the revision it is live in), leaves it at
// expiresAt on the operator's clock (Ready=False Expired, and an Event), and
// says why when it exempts nothing: no such policy, or a ClusterPolicy that
// does not allow exceptions.
func TestPolicyExceptionAppliesThenExpires(t *testing.T) {
	team := testenv.Namespace(t, k8s, "tg-")
	ns := testenv.Namespace(t, k8s, "tg-")
	labelNamespace(t, ns, team)
	startManager(t, controllers.Options{}, ns)
	create(t, policy(ns, "base", 1))
	strict := clusterPolicy(t, "strict-"+team, team, "rm")
	createCluster(t, strict)
	open := clusterPolicy(t, "open-"+team, team, "mv")
	open.Spec.AllowExceptions = true
	createCluster(t, open)

	// expiresAt has one-second precision in the API. Ten seconds leaves room
	// for a loaded machine to publish it before it ends.
	expiry := time.Now().Add(10 * time.Second).Truncate(time.Second)
	later := time.Now().Add(24 * time.Hour)
	create(t, exception(ns, "short", v1alpha1.PolicyKindPolicy, "base", expiry))
	create(t, exception(ns, "cluster-ok", v1alpha1.PolicyKindClusterPolicy, open.Name, later))
	create(t, exception(ns, "cluster-refused", v1alpha1.PolicyKindClusterPolicy, strict.Name, later))
	create(t, exception(ns, "no-policy", v1alpha1.PolicyKindPolicy, "nonexistent", later))

	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "exceptions in force published", func(b engine.Bundle) bool {
		return slices.Equal(exceptionNames(b), []string{"cluster-ok", "short"})
	})
	for _, e := range b.Exceptions {
		if e.Name == "cluster-ok" && (e.PolicyKind != engine.KindClusterPolicy || e.Policy != open.Name) {
			t.Errorf("cluster-ok published as %+v", e)
		}
	}
	// The published bundle exempts the migrator from base's r0 until expiry,
	// on the evaluator's clock, and says so.
	c, _ := engine.Compile(b)
	call := engine.Request{"tool_name": "tool_0", "agent_id": "migrator", "input": map[string]any{"command": "danger_0"}}
	if r := c.Evaluate(call, engine.EvalOptions{Now: func() time.Time { return expiry.Add(-time.Second) }}); r.Decision != engine.Allow || r.ExceptionApplied != "short" {
		t.Errorf("before expiry: %s, exceptionApplied %q; want allow by the exception short", r.Decision, r.ExceptionApplied)
	}
	if r := c.Evaluate(call, engine.EvalOptions{Now: func() time.Time { return expiry }}); r.Decision != engine.Deny || r.MatchedRuleID != "r0" {
		t.Errorf("at expiry: %s by %q, want deny by r0", r.Decision, r.MatchedRuleID)
	}
	short := waitForException(t, ns, "short", v1alpha1.ReasonApplied)
	if short.Status.BundleRevision == "" || readyOf(short.Status.Conditions).Status != metav1.ConditionTrue {
		t.Errorf("short's status %+v", short.Status)
	}
	refused := waitForException(t, ns, "cluster-refused", v1alpha1.ReasonExceptionsNotAllowed)
	if msg := readyOf(refused.Status.Conditions).Message; !containsAll(msg, strict.Name, "allowExceptions") || refused.Status.BundleRevision != "" {
		t.Errorf("cluster-refused: %q, revision %q", msg, refused.Status.BundleRevision)
	}
	missing := waitForException(t, ns, "no-policy", v1alpha1.ReasonPolicyNotFound)
	if msg := readyOf(missing.Status.Conditions).Message; !containsAll(msg, "nonexistent") {
		t.Errorf("no-policy: %q", msg)
	}
	waitForEvent(t, ns, "no-policy", "Warning", v1alpha1.ReasonPolicyNotFound)

	// No event arrives at expiry: only the requeue the controller asked for.
	_, b = testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "short expired", func(b engine.Bundle) bool {
		return slices.Equal(exceptionNames(b), []string{"cluster-ok"})
	})
	if seen := time.Now(); seen.Before(expiry) {
		t.Fatalf("short left the bundle at %s, before expiresAt %s", seen, expiry)
	}
	short = waitForException(t, ns, "short", v1alpha1.ReasonExpired)
	if c := readyOf(short.Status.Conditions); c.Status != metav1.ConditionFalse || short.Status.BundleRevision != "" || !containsAll(c.Message, "expired at") {
		t.Errorf("short after expiry: %+v", short.Status)
	}
	waitForEvent(t, ns, "short", "Normal", v1alpha1.ReasonExpired)
}

// The controller's clock decides expiry, as for freezes: two hours ahead,
// an exception ending in one hour is Expired and left out.
func TestPolicyExceptionExpiryFollowsTheInjectedClock(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}, ns)
	create(t, policy(ns, "base", 1))
	create(t, exception(ns, "in-an-hour", v1alpha1.PolicyKindPolicy, "base", time.Now().Add(time.Hour)))
	waitForException(t, ns, "in-an-hour", v1alpha1.ReasonExpired)
	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "published", func(b engine.Bundle) bool { return len(b.Policies) == 1 })
	if len(b.Exceptions) != 0 {
		t.Fatalf("an exception past its expiry by the controller's clock was published: %v", exceptionNames(b))
	}
}
