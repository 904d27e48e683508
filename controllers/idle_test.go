package controllers_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// versions are the resourceVersions of everything the controller writes in a
// namespace.
type versions map[string]string

func snapshot(t *testing.T, ns string) versions {
	t.Helper()
	ctx := context.Background()
	v := versions{}
	if cm, ok := getBundleConfigMap(t, ns); ok {
		v["configmap"] = cm.ResourceVersion
	}
	var pl v1alpha1.PolicyList
	var fl v1alpha1.FrozenAgentList
	if err := k8s.List(ctx, &pl); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(ctx, &fl); err != nil {
		t.Fatal(err)
	}
	for _, p := range pl.Items {
		if p.Namespace == ns {
			v["policy/"+p.Name] = p.ResourceVersion
		}
	}
	for _, f := range fl.Items {
		if f.Namespace == ns {
			v["frozen/"+f.Name] = f.ResourceVersion
		}
	}
	return v
}

func (v versions) diff(t *testing.T, after versions) {
	t.Helper()
	if len(v) != len(after) {
		t.Fatalf("objects changed: before %v, after %v", v, after)
	}
	for k, rv := range v {
		if after[k] != rv {
			t.Errorf("%s was written: resourceVersion %s -> %s", k, rv, after[k])
		}
	}
}

// settled publishes a namespace with a policy and a freeze and waits until
// every status says so.
func settled(t *testing.T, ns string) engine.Bundle {
	t.Helper()
	create(t, policy(ns, "steady", 3))
	create(t, frozenAgent(ns, "freeze", "agent-1", nil))
	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "published", func(b engine.Bundle) bool { return len(b.Policies) == 1 && len(b.FrozenAgents) == 1 })
	testenv.Eventually(t, "statuses settled", func() (bool, string) {
		p := waitForPolicyReady(t, ns, "steady", v1alpha1.ReasonPublished)
		f := waitForFrozenReady(t, ns, "freeze", v1alpha1.ReasonPublished)
		// The freeze, created last, went live in b; the policy in b or in
		// the revision before it (bundleRevision is where an object's
		// generation went live, not the namespace's latest).
		return p.Status.BundleRevision != "" && f.Status.BundleRevision == b.Revision, "revisions differ"
	})
	return b
}

// republishWritesNothing reconciles ns's unchanged bundle three times with
// a fresh bundle reconciler (as a restarted or re-elected manager would)
// and fails when that changes any object or sends any write; why names
// what makes the content unchanged, for the message.
func republishWritesNothing(t *testing.T, mgr *testManager, opts controllers.Options, ns, why string) {
	t.Helper()
	before := snapshot(t, ns)
	writes := mgr.writes.Load()
	bundler, _ := controllers.NewReconcilersForTest(mgr, opts)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}}
	for range 3 {
		if _, err := bundler.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	before.diff(t, snapshot(t, ns))
	if n := mgr.writes.Load() - writes; n != 0 {
		t.Fatalf("%d write requests for %s", n, why)
	}
}

func TestIdleReconcileWritesNothing(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	mgr := startManager(t, controllers.Options{}, ns)
	settled(t, ns)
	before := snapshot(t, ns)
	unchanged := controllers.PublishCount("unchanged")
	writes := mgr.writes.Load()

	bundler, status := controllers.NewReconcilersForTest(mgr, controllers.Options{})
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}}
	for range 3 {
		for _, r := range []reconcile.Reconciler{bundler, status} {
			res, err := r.Reconcile(context.Background(), req)
			if err != nil || res.RequeueAfter != 0 {
				t.Fatalf("idle reconcile: %+v, %v", res, err)
			}
		}
	}
	before.diff(t, snapshot(t, ns))
	if n := mgr.writes.Load() - writes; n != 0 {
		t.Fatalf("%d write requests during idle reconciles", n)
	}
	if got := controllers.PublishCount("unchanged") - unchanged; got < 3 {
		t.Fatalf("%v unchanged publishes counted, want at least 3", got)
	}
}

func TestRestartedManagerRewritesNothing(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	first := startManager(t, controllers.Options{}, ns)
	b := settled(t, ns)
	first.stop()
	before := snapshot(t, ns)

	unchanged := controllers.PublishCount("unchanged")
	published := reconciles(t, controllers.ControllerName, "success")
	statuses := reconciles(t, controllers.StatusControllerName, "success")
	second := startManager(t, controllers.Options{}, ns)
	testenv.Eventually(t, "the new manager published and wrote statuses", func() (bool, string) {
		return reconciles(t, controllers.ControllerName, "success") > published &&
			reconciles(t, controllers.StatusControllerName, "success") > statuses, "not yet"
	})
	if controllers.PublishCount("unchanged") == unchanged {
		t.Fatal("the reconcile after the restart did not find the bundle unchanged")
	}
	before.diff(t, snapshot(t, ns))
	if n := second.writes.Load(); n != 0 {
		t.Fatalf("the restarted manager sent %d write requests", n)
	}
	if cm, _ := getBundleConfigMap(t, ns); cm.Annotations[v1alpha1.RevisionAnnotation] != b.Revision {
		t.Fatalf("revision %s after restart, was %s", cm.Annotations[v1alpha1.RevisionAnnotation], b.Revision)
	}
}
