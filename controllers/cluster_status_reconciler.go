package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// clusterPendingRecheck is how soon a cluster-scoped object whose
// namespaces are still publishing it is looked at again, besides the
// status passes of those namespaces, which enqueue it as they finish.
const clusterPendingRecheck = time.Second

// clusterStatusReconciler writes the status of ClusterPolicies and
// ClusterFrozenAgents (one controller each, the request naming the object)
// from the outcomes of the namespaces they select.
type clusterStatusReconciler struct {
	client   client.Client
	writer   *statusReconciler // patchStatus: the patch and its Event
	outcomes *outcomeStore
	opts     Options
	// frozen: this one reconciles ClusterFrozenAgents.
	frozen bool
}

func (r *clusterStatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	now := r.opts.Now()
	if r.frozen {
		return r.reconcileFrozen(ctx, req.Name, now)
	}
	var cp v1alpha1.ClusterPolicy
	if err := r.client.Get(ctx, types.NamespacedName{Name: req.Name}, &cp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cp.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	namespaces, err := r.selected(ctx, cp.Spec.NamespaceSelector)
	if err != nil {
		return ctrl.Result{}, err
	}
	problems := engine.CheckPolicy(bundle.ClusterPolicy(&cp))
	st, pending := clusterPolicyStatus(&cp, problems, bundle.SelectorError(cp.Spec.NamespaceSelector),
		progressOf(&cp, namespaces, r.outcomes, false), now)
	next, err := r.enforcement(ctx, &cp, namespaces, "", &st.Enforcement, &st.Conditions)
	if err != nil {
		return ctrl.Result{}, err
	}
	wrote := !equality.Semantic.DeepEqual(cp.Status, st)
	if wrote {
		before := cp.DeepCopy()
		cp.Status = st
		if err := r.writer.patchStatus(ctx, &cp, before, before.Status.Conditions, st.Conditions); err != nil {
			return ctrl.Result{}, err
		}
	}
	return catchUp(leaseRecheck(pendingResult(pending), next), wrote), nil
}

func (r *clusterStatusReconciler) reconcileFrozen(ctx context.Context, name string, now time.Time) (ctrl.Result, error) {
	var cf v1alpha1.ClusterFrozenAgent
	if err := r.client.Get(ctx, types.NamespacedName{Name: name}, &cf); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cf.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	namespaces, err := r.selected(ctx, cf.Spec.NamespaceSelector)
	if err != nil {
		return ctrl.Result{}, err
	}
	st, pending := clusterFrozenAgentStatus(&cf, bundle.SelectorError(cf.Spec.NamespaceSelector),
		progressOf(&cf, namespaces, r.outcomes, true), now)
	next, err := r.enforcement(ctx, &cf, namespaces, v1alpha1.FreezeName("ClusterFrozenAgent", cf.Name), &st.Enforcement, &st.Conditions)
	if err != nil {
		return ctrl.Result{}, err
	}
	wrote := !equality.Semantic.DeepEqual(cf.Status, st)
	if wrote {
		before := cf.DeepCopy()
		cf.Status = st
		if err := r.writer.patchStatus(ctx, &cf, before, before.Status.Conditions, st.Conditions); err != nil {
			return ctrl.Result{}, err
		}
	}
	res := catchUp(leaseRecheck(pendingResult(pending), next), wrote)
	// Back at expiry, to say Expired on time (the bundles drop it then too).
	if cf.Spec.ExpiresAt != nil {
		if d := cf.Spec.ExpiresAt.Sub(now); d > 0 && (res.RequeueAfter == 0 || d < res.RequeueAfter) {
			res.RequeueAfter = d
		}
	}
	return res, nil
}

// enforcement sets the Enforced condition and enforcement status of a
// cluster-scoped object from the sidecars of the namespaces it selects,
// and returns when the first of their live Leases expires.
func (r *clusterStatusReconciler) enforcement(ctx context.Context, obj metav1.Object, namespaces []string, freeze string,
	st **v1alpha1.EnforcementStatus, conds *[]metav1.Condition) (time.Time, error) {
	t, next, err := clusterTally(ctx, r.client, r.outcomes.history, obj, namespaces, freeze)
	if err != nil {
		return time.Time{}, err
	}
	where := fmt.Sprintf("the %d namespaces it selects", len(namespaces))
	*st, *conds = withEnforcement(*conds, obj.GetGeneration(), t, where, time.Now())
	return next, nil
}

// leaseRecheck comes back by the first live Lease's expiry as well.
func leaseRecheck(res ctrl.Result, next time.Time) ctrl.Result {
	if next.IsZero() {
		return res
	}
	if d := time.Until(next) + leaseExpirySlack; res.RequeueAfter == 0 || d < res.RequeueAfter {
		res.RequeueAfter = max(d, leaseExpirySlack)
	}
	return res
}

func pendingResult(pending bool) ctrl.Result {
	if pending {
		return ctrl.Result{RequeueAfter: clusterPendingRecheck}
	}
	return ctrl.Result{}
}

// selected lists the namespaces the operator watches that sel chooses,
// leaving out those being deleted (they get no new bundle).
func (r *clusterStatusReconciler) selected(ctx context.Context, sel *metav1.LabelSelector) ([]string, error) {
	names, err := watchedNamespaces(ctx, r.client, r.opts)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range names {
		if bundle.Selects(sel, ns.Labels) && ns.DeletionTimestamp == nil {
			out = append(out, ns.Name)
		}
	}
	return out, nil
}

// watchedNamespaces lists the Namespaces the operator publishes into: all,
// or those of Options.Namespaces.
func watchedNamespaces(ctx context.Context, c client.Reader, opts Options) ([]corev1.Namespace, error) {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list); err != nil {
		return nil, err
	}
	out := list.Items[:0]
	for _, ns := range list.Items {
		if opts.watches(ns.Name) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// everyNamespace maps an event to a reconcile of every watched namespace's
// bundle: a cluster-scoped object's change may concern any of them (those
// it selects now and those it selected before).
func everyNamespace(c client.Reader, opts Options) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		namespaces, err := watchedNamespaces(ctx, c, opts)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing namespaces to republish")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(namespaces))
		for _, ns := range namespaces {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns.Name, Name: opts.ConfigMapName}})
		}
		return reqs
	}
}

// everyClusterObject maps an event (a Namespace's) to a status pass of every
// object of a cluster-scoped kind: its labels may change what they select.
func everyClusterObject(c client.Reader, list client.ObjectList) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, l); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing cluster-scoped objects")
			return nil
		}
		var reqs []reconcile.Request
		_ = apimeta.EachListItem(l, func(o runtime.Object) error {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: o.(client.Object).GetName()}})
			return nil
		})
		return reqs
	}
}
