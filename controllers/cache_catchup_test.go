package controllers_test

import (
	"context"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAPassThatWroteComesBackOnceTheCacheHasCaughtUp: the status pass reads
// the manager's cache, which holds its own patches only later; Policy
// status changes are no event for it. A pass that wrote must come back
// (in a second) to compare with what the cache then holds, or a pass run
// meanwhile (a Lease renewed just after) compares with the status from
// before the patch and skips a write it needs: found on a real node, where
// Enforced True->False->True stayed False until the next Lease expiry
// (30 s). A pass that wrote nothing does not come back.
func TestAPassThatWroteComesBackOnceTheCacheHasCaughtUp(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	mgr := startManager(t, controllers.Options{}, ns)
	settled(t, ns)
	bundler, status := controllers.NewReconcilersForTest(mgr, controllers.Options{})
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}}
	ctx := context.Background()
	// The test's reconcilers share an outcome store of their own: the
	// bundle reconciler fills it (an unchanged republish writes nothing).
	if _, err := bundler.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}

	cached := func(want string) func() (bool, string) {
		return func() (bool, string) {
			var got v1alpha1.Policy
			if err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: "steady"}, &got); err != nil {
				return false, err.Error()
			}
			c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Reason == want, "the cache does not hold Ready " + want + " yet"
		}
	}
	tamper := func() {
		var p v1alpha1.Policy
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "steady"}, &p); err != nil {
			t.Fatal(err)
		}
		before := p.DeepCopy()
		apimeta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: "Tampered", Message: "written by the test", ObservedGeneration: p.Generation})
		if err := k8s.Status().Patch(ctx, &p, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	passPutsTamperingRight(t, mgr, tamper, cached, func() (ctrl.Result, error) { return status.Reconcile(ctx, req) })

	// Once the cache holds the patch, the pass writes nothing and does not
	// come back.
	testenv.Eventually(t, "the cache holds the status put right", cached(v1alpha1.ReasonPublished))
	passIsQuiet(t, mgr, func() (ctrl.Result, error) { return status.Reconcile(ctx, req) })
}

// TestAClusterPolicyPassThatWroteComesBack: the ClusterPolicy status pass
// has the same stale cache to compare with (its watch passes on spec
// changes only), so a pass that wrote comes back as well.
func TestAClusterPolicyPassThatWroteComesBack(t *testing.T) {
	team := testenv.Namespace(t, k8s, "tg-") // a unique label value
	ns := testenv.Namespace(t, k8s, "tg-")
	labelNamespace(t, ns, team)
	mgr := startManager(t, controllers.Options{}, ns)
	cp := clusterPolicy(t, "catch-up-"+team, team, "rm")
	createCluster(t, cp)
	waitForClusterPolicy(t, cp.Name, "Ready", func(cp *v1alpha1.ClusterPolicy) bool {
		return readyIs(cp.Status.Conditions, metav1.ConditionTrue, v1alpha1.ReasonPublished) && cp.Status.Namespaces == 1
	})
	bundler, status := controllers.NewClusterPolicyStatusReconcilerForTest(mgr, controllers.Options{})
	ctx := context.Background()
	if _, err := bundler.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}}); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: cp.Name}}
	cached := func(want string) func() (bool, string) {
		return func() (bool, string) {
			var got v1alpha1.ClusterPolicy
			if err := mgr.GetClient().Get(ctx, client.ObjectKey{Name: cp.Name}, &got); err != nil {
				return false, err.Error()
			}
			c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Reason == want, "the cache does not hold Ready " + want + " yet"
		}
	}

	tamper := func() {
		var got v1alpha1.ClusterPolicy
		if err := k8s.Get(ctx, client.ObjectKey{Name: cp.Name}, &got); err != nil {
			t.Fatal(err)
		}
		before := got.DeepCopy()
		apimeta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: "Tampered", Message: "written by the test", ObservedGeneration: got.Generation})
		if err := k8s.Status().Patch(ctx, &got, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	passPutsTamperingRight(t, mgr, tamper, cached, func() (ctrl.Result, error) { return status.Reconcile(ctx, req) })

	// Once the cache holds the patch, the pass writes nothing and does not
	// come back.
	testenv.Eventually(t, "the cache holds the status put right", cached(v1alpha1.ReasonPublished))
	passIsQuiet(t, mgr, func() (ctrl.Result, error) { return status.Reconcile(ctx, req) })
}

// passPutsTamperingRight: someone else makes the status wrong (tamper);
// once the cache holds it, one pass puts it right with one write and says
// when to look again. The manager's own controller may put it right first
// (its last pass comes back a second after it wrote): then tamper again.
func passPutsTamperingRight(t *testing.T, mgr *testManager, tamper func(), cached func(reason string) func() (bool, string),
	pass func() (ctrl.Result, error)) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		tamper()
		testenv.Eventually(t, "the cache holds the tampered status", cached("Tampered"))
		writes := mgr.writes.Load()
		res, err := pass()
		if err != nil {
			t.Fatal(err)
		}
		n := mgr.writes.Load() - writes
		if n == 0 && attempt < 5 {
			if ok, _ := cached("Tampered")(); !ok {
				continue // the manager's controller was first
			}
		}
		if n != 1 {
			t.Fatalf("%d writes putting one status right, want 1", n)
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter > 2e9 {
			t.Fatalf("a pass that wrote returned %+v: it must come back within a second or two", res)
		}
		return
	}
}

// passIsQuiet: a pass with nothing to write writes nothing and does not
// come back.
func passIsQuiet(t *testing.T, mgr *testManager, pass func() (ctrl.Result, error)) {
	t.Helper()
	writes := mgr.writes.Load()
	res, err := pass()
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("a pass with nothing to write: %+v, %v", res, err)
	}
	if n := mgr.writes.Load() - writes; n != 0 {
		t.Fatalf("%d writes by a pass with nothing to write", n)
	}
}
