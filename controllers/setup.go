package controllers

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// +kubebuilder:rbac:groups=toolgate.dev,resources=policies;frozenagents;agents;mcpupstreams;policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=toolgate.dev,resources=policies/status;frozenagents/status;agents/status;mcpupstreams/status;policyexceptions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=toolgate.dev,resources=clusterpolicies;clusterfrozenagents,verbs=get;list;watch
// +kubebuilder:rbac:groups=toolgate.dev,resources=clusterpolicies/status;clusterfrozenagents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// The injector grants sidecars create, get, list and watch on ApprovalRequests
// and update on their status (webhook.SidecarRoleRules), which it may only
// grant holding them; the operator also deletes them when spent and writes
// their conditions.
// +kubebuilder:rbac:groups=toolgate.dev,resources=approvalrequests,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=toolgate.dev,resources=approvalrequests/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Controller names, in logs, metrics and events.
const (
	ControllerName       = "toolgate-bundle"
	StatusControllerName = "toolgate-status"
	// ClusterPolicyStatusControllerName and
	// ClusterFrozenAgentStatusControllerName write the cluster-scoped
	// kinds' statuses.
	ClusterPolicyStatusControllerName      = "toolgate-clusterpolicy-status"
	ClusterFrozenAgentStatusControllerName = "toolgate-clusterfrozenagent-status"
)

// Setup registers the bundle and status controllers with mgr. The manager's
// cache must be built with CacheByObject(opts), or it would hold every
// ConfigMap of the cluster.
func Setup(mgr ctrl.Manager, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	opts = opts.withDefaults()
	registerMetrics()
	recorder := mgr.GetEventRecorder(ControllerName)
	outcomes := newOutcomeStore()
	statusesDue := make(chan event.TypedGenericEvent[string], statusQueueSize)
	clusterPoliciesDue := make(chan event.TypedGenericEvent[string], statusQueueSize)
	clusterFrozenDue := make(chan event.TypedGenericEvent[string], statusQueueSize)
	publishing := newPublishFirst(statusYieldLimit)
	br := &bundleReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(),
		opts: opts, outcomes: outcomes, statuses: statusesDue, publishing: publishing}
	sr := &statusReconciler{client: mgr.GetClient(), recorder: recorder, outcomes: outcomes,
		clusterPolicies: clusterPoliciesDue, clusterFrozen: clusterFrozenDue, publishing: publishing}
	controllerOpts := controller.Options{
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		SkipNameValidation:      &opts.SkipNameValidation,
	}
	statusOpts := controllerOpts
	statusOpts.MaxConcurrentReconciles = min(opts.MaxConcurrentReconciles, maxStatusPasses)

	// Every event maps to its namespace's bundle: one reconcile per namespace.
	toBundle := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: opts.ConfigMapName}}}
	})
	ourBundle := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return e.Object.GetName() == opts.ConfigMapName && !br.isOwnWrite(e.Object)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectNew.GetName() == opts.ConfigMapName && !br.isOwnWrite(e.ObjectNew)
		},
		DeleteFunc:  func(e event.DeleteEvent) bool { return e.Object.GetName() == opts.ConfigMapName },
		GenericFunc: func(e event.GenericEvent) bool { return e.Object.GetName() == opts.ConfigMapName },
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		Watches(&v1alpha1.Policy{}, toBundle, builder.WithPredicates(specChanged{})).
		Watches(&v1alpha1.FrozenAgent{}, toBundle, builder.WithPredicates(specChanged{})).
		Watches(&v1alpha1.Agent{}, toBundle, builder.WithPredicates(specChanged{})).
		Watches(&v1alpha1.MCPUpstream{}, toBundle, builder.WithPredicates(specChanged{})).
		Watches(&v1alpha1.PolicyException{}, toBundle, builder.WithPredicates(specChanged{})).
		Watches(&v1alpha1.ClusterPolicy{}, handler.EnqueueRequestsFromMapFunc(everyNamespace(mgr.GetClient(), opts)),
			builder.WithPredicates(specChanged{})).
		Watches(&v1alpha1.ClusterFrozenAgent{}, handler.EnqueueRequestsFromMapFunc(everyNamespace(mgr.GetClient(), opts)),
			builder.WithPredicates(specChanged{})).
		// A Namespace's labels are part of its bundle, and choose the
		// cluster-scoped objects it holds.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetName(), Name: opts.ConfigMapName}}}
		}), builder.WithPredicates(labelsChanged{}, watched(opts))).
		Watches(&corev1.ConfigMap{}, toBundle, builder.WithPredicates(ourBundle))
	if opts.Keys != nil {
		b = b.WatchesRawSource(reSignOnSwap(opts.Keys, mgr.GetClient(), opts.ConfigMapName))
	}
	err := b.WithOptions(controllerOpts).Complete(br)
	if err != nil {
		return fmt.Errorf("setting up the bundle controller: %w", err)
	}

	toNamespace := handler.TypedFuncs[string, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[string], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.Object}}, statusDelay)
		},
	}
	// Status passes give way to publishes (publishFirst) and run at most
	// maxStatusPasses at once.
	err = ctrl.NewControllerManagedBy(mgr).
		Named(StatusControllerName).
		WatchesRawSource(source.TypedChannel(statusesDue, toNamespace)).
		Watches(&coordinationv1.Lease{}, toStatusPass, builder.WithPredicates(leaseChanged{})).
		Watches(&corev1.Pod{}, toStatusPass, builder.WithPredicates(podChanged{})).
		WithOptions(statusOpts).
		Complete(sr)
	if err != nil {
		return fmt.Errorf("setting up the status controller: %w", err)
	}
	if err := setupClusterStatus(mgr, opts, recorder, outcomes, statusOpts, clusterPoliciesDue, clusterFrozenDue); err != nil {
		return err
	}
	return setupApprovals(mgr, opts, controllerOpts)
}

// setupClusterStatus registers the status controllers of ClusterPolicy
// and ClusterFrozenAgent: each passes on its object's changes, on every
// Namespace's (its labels may change what the object selects) and on the
// status passes of the namespaces it selects (due).
func setupClusterStatus(mgr ctrl.Manager, opts Options, recorder events.EventRecorder, outcomes *outcomeStore,
	controllerOpts controller.Options, policiesDue, frozenDue chan event.TypedGenericEvent[string]) error {
	byName := handler.TypedFuncs[string, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[string], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: e.Object}})
		},
	}
	for _, kind := range []struct {
		name   string
		obj    client.Object
		list   client.ObjectList
		due    chan event.TypedGenericEvent[string]
		frozen bool
	}{
		{ClusterPolicyStatusControllerName, &v1alpha1.ClusterPolicy{}, &v1alpha1.ClusterPolicyList{}, policiesDue, false},
		{ClusterFrozenAgentStatusControllerName, &v1alpha1.ClusterFrozenAgent{}, &v1alpha1.ClusterFrozenAgentList{}, frozenDue, true},
	} {
		r := &clusterStatusReconciler{client: mgr.GetClient(), writer: &statusReconciler{client: mgr.GetClient(), recorder: recorder},
			outcomes: outcomes, opts: opts, frozen: kind.frozen}
		err := ctrl.NewControllerManagedBy(mgr).
			Named(kind.name).
			For(kind.obj, builder.WithPredicates(specChanged{})).
			Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(everyClusterObject(mgr.GetClient(), kind.list)),
				builder.WithPredicates(watched(opts))).
			WatchesRawSource(source.TypedChannel(kind.due, byName)).
			WithOptions(controllerOpts).
			Complete(r)
		if err != nil {
			return fmt.Errorf("setting up the %s controller: %w", kind.name, err)
		}
	}
	return nil
}

const (
	// statusQueueSize is how many namespaces can await a status pass before
	// the bundle reconciler waits for the status controller to take them.
	statusQueueSize = 1024
	// statusDelay gathers the publishes of a burst into one status pass.
	// Measured on envtest when a change made every object of its namespace
	// take the new bundleRevision, writing statuses eagerly made publishes
	// several times slower (test/latency); a change now writes only its
	// own object's status, and a burst still coalesces.
	statusDelay = 200 * time.Millisecond
	// maxStatusPasses bounds the namespaces whose statuses are written at
	// once, whatever the publishes' concurrency. A status patch costs the
	// API server more than a publish, and a few in flight already take all
	// it gives: on envtest with 2 cores, 8 patches in flight (4 passes of
	// statusWriters) went through at 218 a second, 32 or 128 at 192-194
	// (make measure-scale -floor 8,32,128). With 16 passes, those let
	// through by statusYieldLimit made the last publish of 1,000
	// namespaces come after 12.1 s, not 7.9 s, and Ready no sooner.
	maxStatusPasses = 4
	// statusYieldLimit is the longest a status pass gives way to publishes
	// (publishFirst): while a cold start publishes, each status worker
	// still passes one namespace a second.
	statusYieldLimit = time.Second
)

// CacheByObject limits the manager's ConfigMap cache to bundle ConfigMaps,
// found by name alone: one created or relabelled without the bundle label is
// still the operator's, seen at once and adopted (overwritten, or deleted in
// a namespace with nothing to publish), not left for sidecars to serve. Its
// Lease and Pod caches hold only the sidecars' (sidecarCacheByObject).
func CacheByObject(opts Options) map[client.Object]cache.ByObject {
	opts = opts.withDefaults()
	byObject := map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", opts.ConfigMapName)},
	}
	maps.Copy(byObject, sidecarCacheByObject())
	return byObject
}

// specChanged ignores updates that cannot change the bundle, above all the
// status patches this controller writes itself.
type specChanged struct {
	predicate.Funcs
}

func (specChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return true
	}
	return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
		!reflect.DeepEqual(e.ObjectOld.GetDeletionTimestamp(), e.ObjectNew.GetDeletionTimestamp())
}

// labelsChanged passes a Namespace created, or updated to other labels: its
// bundle carries them (bundle.BuildSources), its enforce and environment
// labels say who its agents are, and the cluster-scoped objects it holds
// are those whose selectors match them. Deletion removes the bundle with
// the namespace.
type labelsChanged struct {
	predicate.Funcs
}

func (labelsChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return true
	}
	return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
}

// watched passes the Namespaces the operator publishes into: with
// --namespaces, its cache holds no other namespace's objects.
func watched(opts Options) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return opts.watches(o.GetName()) })
}
