package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/engine"
)

// publish makes the namespace's bundle ConfigMap carry p, writing nothing when
// it already does. It reads the cache first; when the cache lags a write of
// ours (or another's), it falls back to an uncached read.
func (r *bundleReconciler) publish(ctx context.Context, ns string, p payload, start time.Time) error {
	ctx, traced := tracePublish(ctx, ns, p)
	key := types.NamespacedName{Namespace: ns, Name: r.opts.ConfigMapName}
	written, err := r.publishParts(ctx, key, p, func() (bool, error) {
		written, err := r.writeCached(ctx, key, p)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
			written, err = r.writeFresh(ctx, key, p)
		}
		return written, err
	})
	switch {
	case err != nil:
		publishesTotal.WithLabelValues(resultFailed).Inc()
		traced(resultFailed, err)
		return err
	case written:
		publishesTotal.WithLabelValues(resultPublished).Inc()
		publishSeconds.Observe(time.Since(start).Seconds())
		traced(resultPublished, nil)
	default:
		publishesTotal.WithLabelValues(resultUnchanged).Inc()
		traced(resultUnchanged, nil)
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
	return true, r.rewrite(ctx, &cm, p)
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
		written = true
		return r.rewrite(ctx, &cm, sp)
	})
	return written, err
}

// rewrite makes the existing cm carry p. An immutable one cannot be
// updated, ever: it is deleted (that very object, by UID) and created anew,
// or one forged with immutable: true would pin the namespace's bundle.
func (r *bundleReconciler) rewrite(ctx context.Context, cm *corev1.ConfigMap, p payload) error {
	if cm.Immutable == nil || !*cm.Immutable {
		applyPayload(cm, p)
		return r.client.Update(ctx, cm)
	}
	err := r.client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting immutable ConfigMap %s/%s to replace it: %w", cm.Namespace, cm.Name, err)
	}
	return r.client.Create(ctx, newBundleConfigMap(client.ObjectKeyFromObject(cm), p))
}

// sealed signs p for the ConfigMap it replaces (nil: none) and records it
// as our write before it is sent: its echo may come first.
func (r *bundleReconciler) sealed(key types.NamespacedName, cm *corev1.ConfigMap, p payload) payload {
	p = r.signed(key.Namespace, cm, p.indexed(key.Name))
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
	r.published.Delete(ns)
	r.regoExports.Delete(ns)
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
	if err := r.deleteParts(ctx, key, 1, partsIn(&cm)); err != nil {
		return err
	}
	r.partsPublished.Delete(key)
	publishesTotal.WithLabelValues(resultDeleted).Inc()
	forgetNamespace(ns)
	return nil
}

// publishFreezes is the fallback when the namespace's bundle is too large: it
// republishes the policies this process last published with the current
// frozen agents, so a freeze applies at once even while the policies cannot
// be updated. It never builds on what the ConfigMap holds: that may have
// been written by someone else, and republishing it would make forged
// policies the operator's own. After a restart, with nothing published yet,
// the freezes go out alone (the namespace's other agents are denied
// NO_POLICIES, failing closed) and, without freezes, the ConfigMap is left
// as it is. It returns the revision published, or "" when it published
// nothing, and whether the freezes went out alone.
func (r *bundleReconciler) publishFreezes(ctx context.Context, ns string, frozen []engine.FrozenAgent, start time.Time) (revision string, alone bool, err error) {
	var b engine.Bundle
	if last, ok := r.published.Load(ns); ok {
		b = last.(engine.Bundle)
	} else if len(frozen) == 0 {
		return "", false, nil
	}
	b.FrozenAgents = frozen
	doc, revision, err := engine.Encode(b)
	if err != nil {
		return "", false, err
	}
	// The Rego bundle goes along when it exports and fits; the freezes go
	// out without it otherwise.
	regoTar, _ := r.regoBundle(ns, b, revision)
	p, err := renderPayload(doc, revision, r.opts.CompressAbove, r.opts.MaxStoredBytes, r.opts.MaxParts, regoTar)
	if err != nil && regoTar != nil {
		p, err = renderPayload(doc, revision, r.opts.CompressAbove, r.opts.MaxStoredBytes, r.opts.MaxParts, nil)
	}
	if err != nil {
		return "", false, nil
	}
	if err := r.publish(ctx, ns, p, start); err != nil {
		return "", false, err
	}
	r.published.Store(ns, b)
	return revision, len(b.Policies) == 0, nil
}
