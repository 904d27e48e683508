package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// Its RBAC (get, list, watch and delete ApprovalRequests, patch their
// status) is among setup.go's markers, with what the injector grants.

// ApprovalControllerName names the ApprovalRequest controller in logs,
// metrics and events.
const ApprovalControllerName = "toolgate-approvals"

// expiryMargin is added to the requeue at expiresAt so that the reconcile
// it brings finds the request expired, never a hair before.
const expiryMargin = 50 * time.Millisecond

// approvalReconciler tells people about ApprovalRequests and cleans them
// up. It never decides, and it writes only the conditions of a request's
// status: decision, decidedBy and consumedAt belong to the approver and
// to the sidecar.
type approvalReconciler struct {
	client   client.Client
	recorder events.EventRecorder
	opts     ApprovalOptions
	now      func() time.Time
	pending  *pendingRequests
	notify   *notifier // nil without a notify URL
}

// setupApprovals registers the ApprovalRequest controller, and its
// notifier when a notify URL is set.
func setupApprovals(mgr ctrl.Manager, opts Options, controllerOpts controller.Options) error {
	r := &approvalReconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorder(ApprovalControllerName),
		opts: opts.Approvals, now: opts.Now, pending: newPendingRequests()}
	if opts.Approvals.NotifyURL != "" {
		n, err := newNotifier(opts.Approvals, opts.Now)
		if err != nil {
			return err
		}
		if err := mgr.Add(n); err != nil {
			return fmt.Errorf("adding the approval notifier: %w", err)
		}
		r.notify = n
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ApprovalControllerName).
		// Every update: a decision or a consumption is a status write,
		// which leaves the generation alone.
		For(&v1alpha1.ApprovalRequest{}).
		WithOptions(controllerOpts).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the approval controller: %w", err)
	}
	return nil
}

func (r *approvalReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ar v1alpha1.ApprovalRequest
	if err := r.client.Get(ctx, req.NamespacedName, &ar); err != nil {
		if apierrors.IsNotFound(err) {
			r.pending.set(req.NamespacedName, false)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if ar.DeletionTimestamp != nil { // going: it waits for nobody
		r.pending.set(req.NamespacedName, false)
		return ctrl.Result{}, nil
	}
	now := r.now()
	v := approvalState(&ar, now)
	written, err := r.record(ctx, &ar, v)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !written {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	r.pending.set(req.NamespacedName, v.reason == v1alpha1.ReasonApprovalPending)
	return r.cleanUp(ctx, &ar, v, now)
}

// record writes v's Ready condition when ar does not carry it yet, and
// announces the transition once written. It reports whether ar now
// carries it; false without an error is a conflict: the cache is behind.
func (r *approvalReconciler) record(ctx context.Context, ar *v1alpha1.ApprovalRequest, v approvalView) (bool, error) {
	conds := v.conditions(ar)
	if conds == nil {
		return true, nil
	}
	prev := previousReason(ar)
	before := ar.DeepCopy()
	ar.Status.Conditions = conds
	// Optimistically locked: the condition is the record of which
	// transitions were counted and announced, so a write from a stale
	// cache must fail rather than announce one twice. The newer version's
	// watch event brings another reconcile; the requeue only guards
	// against its loss.
	err := r.client.Status().Patch(ctx, ar, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if prev != v.reason {
		r.announce(ar, prev, v)
	}
	return true, nil
}

// cleanUp deletes a finished request once its retention has passed, or
// says when to look again: at expiry while it may still be decided or
// used, at the end of its retention after.
func (r *approvalReconciler) cleanUp(ctx context.Context, ar *v1alpha1.ApprovalRequest, v approvalView, now time.Time) (ctrl.Result, error) {
	if v.finishedAt.IsZero() {
		return ctrl.Result{RequeueAfter: v.expiresAt.Sub(now) + expiryMargin}, nil
	}
	deleteAt := v.finishedAt.Add(r.opts.Retention)
	if now.Before(deleteAt) {
		return ctrl.Result{RequeueAfter: deleteAt.Sub(now)}, nil
	}
	// Only this object: one recreated under the name since is not ours to
	// judge by this one's state.
	if err := r.client.Delete(ctx, ar, client.Preconditions{UID: &ar.UID}); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	r.pending.set(client.ObjectKeyFromObject(ar), false)
	return ctrl.Result{}, nil
}

// announce counts, and tells people of, the transition from the Ready
// reason prev ("" for a request never seen) to v, which the status write
// just recorded.
func (r *approvalReconciler) announce(ar *v1alpha1.ApprovalRequest, prev string, v approvalView) {
	for _, o := range newOutcomes(prev, v.reason, ar.Status.Decision) {
		approvalsTotal.WithLabelValues(o).Inc()
	}
	if v.reason != v1alpha1.ReasonApprovalPending {
		emit(r.recorder, ar, corev1.EventTypeNormal, v.reason, approvalAction[v.reason], v.ready.Message)
		return
	}
	emit(r.recorder, ar, corev1.EventTypeNormal, v1alpha1.ReasonApprovalRequested, "Request", requestNote(ar))
	if r.notify != nil {
		r.notify.enqueue(newNotice(ar))
	}
}

// approvalAction is the Event's action for each reason it announces.
var approvalAction = map[string]string{
	v1alpha1.ReasonApproved:        "Approve",
	v1alpha1.ReasonDenied:          "Deny",
	v1alpha1.ReasonApprovalExpired: "Expire",
	v1alpha1.ReasonConsumed:        "Consume",
}

// milestones are the outcomes a request in Ready reason has gone through;
// decision tells whether an Expired one had been approved.
func milestones(reason string, decision v1alpha1.ApprovalDecision) []string {
	switch reason {
	case "":
		return nil
	case v1alpha1.ReasonApproved:
		return []string{outcomeRequested, outcomeApproved}
	case v1alpha1.ReasonDenied:
		return []string{outcomeRequested, outcomeDenied}
	case v1alpha1.ReasonConsumed:
		return []string{outcomeRequested, outcomeApproved, outcomeConsumed}
	case v1alpha1.ReasonApprovalExpired:
		if decision == v1alpha1.ApprovalApproved {
			return []string{outcomeRequested, outcomeApproved, outcomeExpired}
		}
		return []string{outcomeRequested, outcomeExpired}
	}
	return []string{outcomeRequested}
}

// newOutcomes are the outcomes reached going from prev to now: each counts
// once per request, even when the operator saw only the end (approved and
// consumed between two of its looks counts both).
func newOutcomes(prev, now string, decision v1alpha1.ApprovalDecision) []string {
	seen := map[string]bool{}
	for _, o := range milestones(prev, decision) {
		seen[o] = true
	}
	var out []string
	for _, o := range milestones(now, decision) {
		if !seen[o] {
			out = append(out, o)
		}
	}
	return out
}

// requestNote is the ApprovalRequested Event's note: who asks for what,
// and the commands that approve it. The commands are kept whole; the
// call's description gives way to fit the events API's limit.
func requestNote(ar *v1alpha1.ApprovalRequest) string {
	call := ar.Spec.Tool
	if ar.Spec.Server != "" {
		call += " on server " + ar.Spec.Server
	}
	if ar.Spec.Action != "" {
		call += " (action " + ar.Spec.Action + ")"
	}
	head := fmt.Sprintf("agent %q asks to call %s: %s.", ar.Spec.AgentID, call, orUnknown(ar.Spec.Reason))
	tail := fmt.Sprintf(" Approve with: %s, or: %s", approveCommand(ar), kubectlApproveCommand(ar))
	if room := maxEventNote - len(tail); len(head) > room {
		head = strings.ToValidUTF8(head[:max(room-3, 0)], "") + "..."
	}
	return head + tail
}
