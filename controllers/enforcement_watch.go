package controllers

import (
	"context"
	"maps"
	"reflect"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// The operator reads the sidecars' Leases and the injected Pods (only
// those, label-selected) into the Enforced condition. The Lease verbs are
// declared with the leader election's in setup.go.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// leaseExpirySlack is added to a Lease's expiry before the status is looked
// at again, so that the pass sees it expired rather than a hair before.
const leaseExpirySlack = 100 * time.Millisecond

// sidecarCacheByObject keeps the manager's cache of Leases and Pods to the
// sidecars' own: Leases labelled LabelSidecar, and injected Pods stripped
// to what sidecarsOf reads, so 10,000 namespaces of agents stay cheap.
func sidecarCacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {
			Label:     labels.SelectorFromSet(labels.Set{v1alpha1.LabelSidecar: "true"}),
			Transform: stripManagedFields,
		},
		&corev1.Pod{}: {
			Label:     labels.SelectorFromSet(labels.Set{v1alpha1.LabelInjected: "true"}),
			Transform: slimPod,
		},
	}
}

// slimPod keeps of a Pod its name, namespace, uid, labels, owners,
// deletion and phase: the spec and most of the status of every agent Pod
// would otherwise be the largest thing the operator holds.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp, OwnerReferences: p.OwnerReferences},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

func stripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// enforcementView is what one status pass knows of a namespace's sidecars.
type enforcementView struct {
	sidecars []sidecar
	history  revisionsOf
	next     time.Time // the first live Lease's expiry
	now      time.Time
}

// readSidecars lists a namespace's injected Pods and sidecar Leases from
// the cache and reads them at now.
func readSidecars(ctx context.Context, c client.Reader, ns string, now time.Time) ([]sidecar, time.Time, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelInjected: "true"}); err != nil {
		return nil, time.Time{}, err
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelSidecar: "true"}); err != nil {
		return nil, time.Time{}, err
	}
	live, next := sidecarsOf(pods.Items, leases.Items, now)
	return live, next, nil
}

// enforcementView reads the namespace's sidecars and remembers the digest
// of the freezes they should apply, for the cluster-scoped passes.
func (r *statusReconciler) enforcementView(ctx context.Context, in inputs) (enforcementView, error) {
	now := time.Now() // Leases are renewed on the wall clock
	live, next, err := readSidecars(ctx, r.client, in.namespace, now)
	if err != nil {
		return enforcementView{}, err
	}
	r.outcomes.history.setFreezeDigest(in.namespace, expectedFreezes(in, now))
	return enforcementView{sidecars: live, history: r.outcomes.history.revisions(in.namespace), next: next, now: now}, nil
}

// recheck comes back when the first live Lease expires: an expiry is no
// event.
func (v enforcementView) recheck() ctrl.Result {
	if v.next.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: v.next.Sub(v.now) + leaseExpirySlack}
}

func (v enforcementView) policy(p *v1alpha1.Policy, conds []metav1.Condition) (*v1alpha1.EnforcementStatus, []metav1.Condition) {
	return withEnforcement(conds, p.Generation, tallyOf(v.sidecars, servesGeneration(v.history, p), ""), "the namespace", v.now)
}

func (v enforcementView) frozenAgent(f *v1alpha1.FrozenAgent, conds []metav1.Condition) (*v1alpha1.EnforcementStatus, []metav1.Condition) {
	current := appliesFreeze(v.history, f, v1alpha1.FreezeName("FrozenAgent", f.Name))
	return withEnforcement(conds, f.Generation, tallyOf(v.sidecars, current, ""), "the namespace", v.now)
}

// clusterTally sums, for a cluster-scoped object, the tallies of the
// namespaces it selects, reading their sidecars from the cache; freeze
// names it as a ClusterFrozenAgent ("" for a ClusterPolicy).
func clusterTally(ctx context.Context, c client.Reader, history *revisionHistory, obj metav1.Object, namespaces []string, freeze string) (tally, time.Time, error) {
	now := time.Now()
	var total tally
	var next time.Time
	for _, ns := range namespaces {
		live, expires, err := readSidecars(ctx, c, ns, now)
		if err != nil {
			return tally{}, time.Time{}, err
		}
		if !expires.IsZero() && (next.IsZero() || expires.Before(next)) {
			next = expires
		}
		h := history.revisions(ns)
		current := servesGeneration(h, obj)
		if freeze != "" {
			current = appliesFreeze(h, obj, freeze)
		}
		total.add(tallyOf(live, current, ns+"/"))
	}
	return total, next, nil
}

// toStatusPass maps a Lease's or Pod's event to its namespace's status
// pass.
var toStatusPass = handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace()}}}
})

// leaseChanged passes a sidecar Lease's creation and deletion, and an
// update that changes what it reports or revives it; a plain renewal
// changes nothing, and expiry is caught by enforcementView.recheck.
type leaseChanged struct {
	predicate.Funcs
}

func (leaseChanged) Update(e event.UpdateEvent) bool {
	before, okBefore := e.ObjectOld.(*coordinationv1.Lease)
	after, okAfter := e.ObjectNew.(*coordinationv1.Lease)
	if !okBefore || !okAfter {
		return true
	}
	if !maps.Equal(before.Annotations, after.Annotations) || !reflect.DeepEqual(before.OwnerReferences, after.OwnerReferences) ||
		!reflect.DeepEqual(before.Spec.LeaseDurationSeconds, after.Spec.LeaseDurationSeconds) ||
		!reflect.DeepEqual(before.DeletionTimestamp, after.DeletionTimestamp) {
		return true
	}
	if before.Spec.RenewTime == nil || after.Spec.RenewTime == nil {
		return before.Spec.RenewTime != after.Spec.RenewTime
	}
	var duration int32
	if before.Spec.LeaseDurationSeconds != nil {
		duration = *before.Spec.LeaseDurationSeconds
	}
	return !v1alpha1.LeaseLive(before.Spec.RenewTime.Time, duration, time.Now())
}

// podChanged passes an injected Pod's creation and deletion, and an update
// that finishes it or starts deleting it.
type podChanged struct {
	predicate.Funcs
}

func (podChanged) Update(e event.UpdateEvent) bool {
	before, okBefore := e.ObjectOld.(*corev1.Pod)
	after, okAfter := e.ObjectNew.(*corev1.Pod)
	if !okBefore || !okAfter {
		return true
	}
	return before.Status.Phase != after.Status.Phase || (before.DeletionTimestamp == nil) != (after.DeletionTimestamp == nil)
}
