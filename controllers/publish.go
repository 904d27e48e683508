package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// publish makes the namespace's bundle ConfigMap carry p, writing nothing when
// it already does. It reads the cache first; when the cache lags a write of
// ours, or hides a ConfigMap whose labels were removed by hand, it falls back
// to an uncached read.
func (r *bundleReconciler) publish(ctx context.Context, ns string, p payload, start time.Time) error {
	key := types.NamespacedName{Namespace: ns, Name: r.opts.ConfigMapName}
	written, err := r.writeCached(ctx, key, p)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
		written, err = r.writeFresh(ctx, key, p)
	}
	switch {
	case err != nil:
		publishesTotal.WithLabelValues(resultFailed).Inc()
		return err
	case written:
		publishesTotal.WithLabelValues(resultPublished).Inc()
		publishSeconds.Observe(time.Since(start).Seconds())
	default:
		publishesTotal.WithLabelValues(resultUnchanged).Inc()
	}
	bundleSizeBytes.WithLabelValues(ns).Set(float64(p.size))
	return nil
}

// writeCached and writeFresh tell whether they wrote: false when the
// ConfigMap was already up to date.
func (r *bundleReconciler) writeCached(ctx context.Context, key types.NamespacedName, p payload) (bool, error) {
	var cm corev1.ConfigMap
	err := r.client.Get(ctx, key, &cm)
	if apierrors.IsNotFound(err) {
		return true, r.client.Create(ctx, newBundleConfigMap(key, r.sealed(key, nil, p)))
	}
	if err != nil {
		return false, err
	}
	if p = r.sealed(key, &cm, p); upToDate(&cm, p) {
		return false, nil
	}
	applyPayload(&cm, p)
	return true, r.client.Update(ctx, &cm)
}

func (r *bundleReconciler) writeFresh(ctx context.Context, key types.NamespacedName, p payload) (bool, error) {
	written := false
	retriable := func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)
	}
	err := retry.OnError(retry.DefaultRetry, retriable, func() error {
		written = false
		var cm corev1.ConfigMap
		err := r.apiReader.Get(ctx, key, &cm)
		if apierrors.IsNotFound(err) {
			written = true
			return r.client.Create(ctx, newBundleConfigMap(key, r.sealed(key, nil, p)))
		}
		if err != nil {
			return err
		}
		sp := r.sealed(key, &cm, p)
		if upToDate(&cm, sp) {
			return nil
		}
		applyPayload(&cm, sp)
		written = true
		return r.client.Update(ctx, &cm)
	})
	return written, err
}

// sealed signs p for the ConfigMap it replaces (nil: none) and records it
// as our write before it is sent: its echo may come first.
func (r *bundleReconciler) sealed(key types.NamespacedName, cm *corev1.ConfigMap, p payload) payload {
	p = r.signed(key.Namespace, cm, p)
	r.written.Store(key, p)
	return p
}

func newBundleConfigMap(key types.NamespacedName, p payload) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	applyPayload(cm, p)
	return cm
}

// deleteBundle removes the bundle of a namespace left without Policies and
// FrozenAgents.
func (r *bundleReconciler) deleteBundle(ctx context.Context, ns string) error {
	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: ns, Name: r.opts.ConfigMapName}
	r.written.Delete(key)
	err := r.client.Get(ctx, key, &cm)
	if apierrors.IsNotFound(err) {
		forgetNamespace(ns)
		return nil
	}
	if err != nil {
		return err
	}
	if err := client.IgnoreNotFound(r.client.Delete(ctx, &cm)); err != nil {
		publishesTotal.WithLabelValues(resultFailed).Inc()
		return err
	}
	publishesTotal.WithLabelValues(resultDeleted).Inc()
	forgetNamespace(ns)
	return nil
}

// publishFreezes is the fallback when the namespace's bundle is too large: it
// republishes the last published policies with the current frozen agents, so
// a freeze applies at once even while the policies cannot be updated. It
// returns the revision published, or "" when there is none to build on (a
// bundle that does not read back is left for the restore path) or even that
// does not fit.
func (r *bundleReconciler) publishFreezes(ctx context.Context, ns string, frozen []engine.FrozenAgent, start time.Time) (string, error) {
	var prev engine.Bundle
	var cm corev1.ConfigMap
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: r.opts.ConfigMapName}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		// No bundle yet: sidecars deny NO_POLICIES; with the freezes, frozen
		// agents get AGENT_FROZEN and the rest still NO_POLICIES.
	case err != nil:
		return "", err
	default:
		raw, gzipped, err := bundle.FromConfigMap(&cm)
		if err != nil {
			return "", nil
		}
		doc, err := bundle.ReadDocument(raw, gzipped)
		if err != nil {
			return "", nil
		}
		if prev, err = engine.Decode(doc); err != nil {
			return "", nil
		}
	}
	prev.FrozenAgents = frozen
	doc, revision, err := engine.Encode(prev)
	if err != nil {
		return "", err
	}
	p, err := renderPayload(doc, revision, r.opts.CompressAbove, r.opts.MaxStoredBytes)
	if err != nil {
		return "", nil
	}
	if err := r.publish(ctx, ns, p, start); err != nil {
		return "", err
	}
	return revision, nil
}
