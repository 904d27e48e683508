package controllers

import (
	"context"
	"strings"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// statusWriters bounds concurrent status patches per namespace. More would
// finish a pass sooner but take API server time from publishes, which are
// what sidecars wait for.
const statusWriters = 2

// maxEventNote is the events.k8s.io limit on an event's note.
const maxEventNote = 1024

// writeStatuses patches the status of every object whose status changed, and
// only those: an idle reconcile writes nothing. Objects changed since the
// outcome was computed are only marked Reconciling: their next publish
// brings a new outcome. Policies and FrozenAgents get their Enforced
// condition from view in the same patch as Ready.
//
// It returns how many patches it sent: the manager's cache sees them only
// later, and a pass meanwhile would compare with the status from before
// them (Reconcile comes back once the cache has caught up).
func (r *statusReconciler) writeStatuses(ctx context.Context, in inputs, out outcome, view enforcementView) (int, error) {
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(statusWriters)
	g := &patches{Group: eg}
	for i := range in.policies {
		p := &in.policies[i]
		if !out.describes(p) {
			if conds := reconcilingMark(p.Status.Conditions, p.Generation, out.now); conds != nil {
				g.Go(func() error {
					before := p.DeepCopy()
					p.Status.Conditions = conds
					return r.patchStatus(ctx, p, before, nil, nil)
				})
			}
			continue
		}
		st := policyStatus(p, out)
		st.Enforcement, st.Conditions = view.policy(p, st.Conditions)
		if !equality.Semantic.DeepEqual(p.Status, st) {
			g.Go(func() error {
				before := p.DeepCopy()
				p.Status = st
				return r.patchStatus(ctx, p, before, before.Status.Conditions, st.Conditions)
			})
		}
	}
	for i := range in.frozen {
		f := &in.frozen[i]
		if !out.describes(f) {
			if conds := reconcilingMark(f.Status.Conditions, f.Generation, out.now); conds != nil {
				g.Go(func() error {
					before := f.DeepCopy()
					f.Status.Conditions = conds
					return r.patchStatus(ctx, f, before, nil, nil)
				})
			}
			continue
		}
		st := frozenAgentStatus(f, out)
		st.Enforcement, st.Conditions = view.frozenAgent(f, st.Conditions)
		if !equality.Semantic.DeepEqual(f.Status, st) {
			g.Go(func() error {
				before := f.DeepCopy()
				f.Status = st
				return r.patchStatus(ctx, f, before, before.Status.Conditions, st.Conditions)
			})
		}
	}
	for i := range in.exceptions {
		pe := &in.exceptions[i]
		if !out.describes(pe) {
			if conds := reconcilingMark(pe.Status.Conditions, pe.Generation, out.now); conds != nil {
				g.Go(func() error {
					before := pe.DeepCopy()
					pe.Status.Conditions = conds
					return r.patchStatus(ctx, pe, before, nil, nil)
				})
			}
			continue
		}
		if st := exceptionStatus(pe, out); !equality.Semantic.DeepEqual(pe.Status, st) {
			g.Go(func() error {
				before := pe.DeepCopy()
				pe.Status = st
				return r.patchStatus(ctx, pe, before, before.Status.Conditions, st.Conditions)
			})
		}
	}
	for i := range in.registration.Agents {
		a := &in.registration.Agents[i]
		r.writeIdentityStatus(ctx, g, a, &a.Status, out.conflicts[a.Name], out)
	}
	for i := range in.registration.Upstreams {
		u := &in.registration.Upstreams[i]
		r.writeIdentityStatus(ctx, g, u, &u.Status, "", out)
	}
	return g.n, g.Wait()
}

// patches is an errgroup that counts the patches it ran.
type patches struct {
	*errgroup.Group
	n int
}

func (p *patches) Go(f func() error) {
	p.n++
	p.Group.Go(f)
}

// writeIdentityStatus patches an Agent's or MCPUpstream's status (status,
// inside obj) when it changed, as writeStatuses does the others'.
func (r *statusReconciler) writeIdentityStatus(ctx context.Context, g *patches, obj client.Object, status *v1alpha1.IdentityStatus, conflictWith string, out outcome) {
	if !out.describes(obj) {
		if conds := reconcilingMark(status.Conditions, obj.GetGeneration(), out.now); conds != nil {
			g.Go(func() error {
				before := obj.DeepCopyObject().(client.Object)
				status.Conditions = conds
				return r.patchStatus(ctx, obj, before, nil, nil)
			})
		}
		return
	}
	if st := identityStatus(obj, status, conflictWith, out); !equality.Semantic.DeepEqual(*status, st) {
		g.Go(func() error {
			before := obj.DeepCopyObject().(client.Object)
			was := status.Conditions
			*status = st
			return r.patchStatus(ctx, obj, before, was, st.Conditions)
		})
	}
}

// patchStatus sends only the status difference, so it never conflicts with a
// user's concurrent spec edit; an object deleted meanwhile is no error.
func (r *statusReconciler) patchStatus(ctx context.Context, obj, before client.Object, was, now []metav1.Condition) error {
	if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !readyChanged(was, now) {
		return nil
	}
	ready := apimeta.FindStatusCondition(now, v1alpha1.ConditionReady)
	switch ready.Reason {
	case v1alpha1.ReasonPublishFailed:
		// One event per failure streak: retries that fail again (perhaps
		// with another error) update the condition, not the event stream.
		if prev := apimeta.FindStatusCondition(was, v1alpha1.ConditionReady); prev == nil || prev.Reason != ready.Reason {
			emit(r.recorder, obj, corev1.EventTypeWarning, ready.Reason, "Publish", ready.Message)
		}
	case v1alpha1.ReasonCompileError, v1alpha1.ReasonBundleTooLarge, v1alpha1.ReasonRegoExportRefused, v1alpha1.ReasonConflict,
		v1alpha1.ReasonSelectorError, v1alpha1.ReasonPolicyNotFound, v1alpha1.ReasonExceptionsNotAllowed:
		emit(r.recorder, obj, corev1.EventTypeWarning, ready.Reason, "Publish", ready.Message)
	case v1alpha1.ReasonExpired:
		emit(r.recorder, obj, corev1.EventTypeNormal, ready.Reason, "Expire", ready.Message)
	}
	return nil
}

func emit(rec events.EventRecorder, obj runtime.Object, eventType, reason, action, note string) {
	if len(note) > maxEventNote {
		note = strings.ToValidUTF8(note[:maxEventNote-3], "") + "..."
	}
	rec.Eventf(obj, nil, eventType, reason, action, "%s", note)
}
