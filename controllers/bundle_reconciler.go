package controllers

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// bundleReconciler publishes one namespace's bundle per request; the
// request's name is the bundle ConfigMap's. Statuses are left to the status
// controller, so a namespace with many objects does not delay its next
// publish while their statuses are written.
type bundleReconciler struct {
	client    client.Client
	apiReader client.Reader // uncached, for when the cache lags our own writes
	opts      Options
	outcomes  *outcomeStore
	statuses  chan<- event.TypedGenericEvent[string] // namespaces whose statuses are due
	// publishing tells status passes a publish is in progress (nil: no one
	// listens).
	publishing *publishFirst
	written    sync.Map // ConfigMap key -> the payload last written there
	// published holds, per namespace, the bundle this process last
	// published: what a BundleTooLarge namespace's freezes are added to.
	published sync.Map // namespace -> engine.Bundle
	// regoExports holds, per namespace, the last Rego bundle exported
	// (PublishRego).
	regoExports sync.Map // namespace -> regoExport
	// partsWritten and partsPublished are chunks.go's: the digest last
	// written to each part ConfigMap, and how many parts each bundle
	// ConfigMap's index last named.
	partsWritten, partsPublished sync.Map
}

func (r *bundleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.publishing.begin()()
	start := time.Now()
	now := r.opts.Now()
	in, err := gather(ctx, r.client, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	if in.empty() {
		// Sidecars then deny NO_POLICIES: no bundle is not an empty allow-all.
		r.outcomes.delete(req.Namespace)
		return ctrl.Result{}, r.deleteBundle(ctx, req.Namespace)
	}

	b, exceptions := bundle.BuildSources(in.sources(), now)
	bundle.Register(&b, in.registration)
	doc, revision, err := engine.Encode(b)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	_, diags := engine.Compile(b)
	out := newOutcome(in, r.opts.ConfigMapName, revision, diags, now)
	out.exceptions = exceptions
	compileErrors.WithLabelValues(req.Namespace).Set(float64(len(diags)))

	regoTar, regoErr := r.regoBundle(req.Namespace, b, revision)
	out.regoErr = regoErr
	p, err := renderPayload(doc, revision, r.opts.CompressAbove, r.opts.MaxStoredBytes, r.opts.MaxParts, regoTar)
	var tooLarge *errBundleTooLarge
	switch {
	case errors.As(err, &tooLarge):
		out.tooLarge = err
		publishesTotal.WithLabelValues(resultTooLarge).Inc()
		// The kill switch must not wait for the policies to shrink.
		if out.freezeRevision, out.freezeAlone, err = r.publishFreezes(ctx, req.Namespace, b.FrozenAgents, start); err != nil {
			return r.publishFailed(ctx, req.Namespace, out, err)
		}
		bundleFrozenAgents.WithLabelValues(req.Namespace).Set(float64(len(b.FrozenAgents)))
	case err != nil:
		return ctrl.Result{}, err
	default:
		if err := r.publish(ctx, req.Namespace, p, start); err != nil {
			return r.publishFailed(ctx, req.Namespace, out, err)
		}
		r.published.Store(req.Namespace, b)
		bundleRules.WithLabelValues(req.Namespace).Set(float64(ruleCount(b)))
		bundlePolicies.WithLabelValues(req.Namespace).Set(float64(len(b.Policies)))
		bundleFrozenAgents.WithLabelValues(req.Namespace).Set(float64(len(b.FrozenAgents)))
	}

	r.outcomes.set(req.Namespace, out)
	if err := r.statusesDue(ctx, req.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	return requeueResult(in, now, out.tooLarge)
}

// publishFailed has the namespace's objects say that the API server refused
// the write (Ready=False, PublishFailed, with its error), and retries with
// backoff.
func (r *bundleReconciler) publishFailed(ctx context.Context, ns string, out outcome, err error) (ctrl.Result, error) {
	out.publishErr = err
	r.outcomes.set(ns, out)
	if serr := r.statusesDue(ctx, ns); serr != nil {
		return ctrl.Result{}, serr
	}
	return ctrl.Result{}, err
}

// statusesDue hands the namespace to the status controller.
func (r *bundleReconciler) statusesDue(ctx context.Context, ns string) error {
	if r.statuses == nil {
		return nil
	}
	select {
	case r.statuses <- event.TypedGenericEvent[string]{Object: ns}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isOwnWrite tells whether a ConfigMap event only echoes our last write,
// which needs no reconcile. It compares content, not resourceVersions: the
// echo can arrive before the write's response does. A hand edit differs.
func (r *bundleReconciler) isOwnWrite(o client.Object) bool {
	cm, isCM := o.(*corev1.ConfigMap)
	p, ok := r.written.Load(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
	return isCM && ok && upToDate(cm, p.(payload))
}

// requeueResult comes back when the next freeze or exception expires, so
// that it leaves the bundle, and its status says so, on time. A bundle too
// large to publish is invalid input and is not retried until something
// changes.
func requeueResult(in inputs, now time.Time, tooLarge error) (ctrl.Result, error) {
	var next time.Duration
	until := func(t time.Time) {
		if d := t.Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for i := range in.frozen {
		if t := in.frozen[i].Spec.ExpiresAt; t != nil {
			until(t.Time)
		}
	}
	for i := range in.clusterFrozen {
		if t := in.clusterFrozen[i].Spec.ExpiresAt; t != nil {
			until(t.Time)
		}
	}
	for i := range in.exceptions {
		until(in.exceptions[i].Spec.ExpiresAt.Time)
	}
	if tooLarge != nil && next == 0 {
		return ctrl.Result{}, reconcile.TerminalError(tooLarge)
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

func ruleCount(b engine.Bundle) int {
	n := 0
	for _, p := range b.Policies {
		n += len(p.Rules)
	}
	return n
}
