package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

// Chunked bundles (bundle/chunks.go has the format): a gzipped document
// past what one ConfigMap holds is stored in parts, in ConfigMaps NAME-1 ...
// NAME-N beside the bundle ConfigMap NAME, which then holds their signed
// index. Parts are written before the index and deleted after it stops
// naming them, so sidecars never see an index whose parts are missing.

// BundlePartLabel marks a part ConfigMap of a chunked bundle.
const BundlePartLabel = "toolgate.dev/bundle-part"

// indexReserve is what the bundle ConfigMap keeps free for the index and
// the signatures of a chunked bundle: an index of bundle.MaxParts parts is
// under 3 KiB, each signature under 1 KiB, endorsements under 8 KiB.
const indexReserve = 16 << 10

// chunks is a gzip stream stored in parts of partSize bytes. index, parts
// and names are filled in by indexed, for one ConfigMap name.
type chunks struct {
	gz       []byte
	partSize int

	index []byte
	parts [][]byte
	names []string
}

// renderChunks stores a gzip stream too large for mainBudget (what the
// bundle ConfigMap has left beside the Rego bundle) in parts of partSize
// bytes, at most maxParts of them (0: bundle.MaxParts).
func renderChunks(rawLen int, gz []byte, revision string, mainBudget, partSize, maxParts int) (payload, error) {
	if maxParts <= 0 || maxParts > bundle.MaxParts {
		maxParts = bundle.MaxParts
	}
	if partSize <= 0 {
		return payload{}, &errBundleTooLarge{raw: rawLen, compressed: len(gz), limit: mainBudget}
	}
	if n := (len(gz) + partSize - 1) / partSize; n > maxParts {
		return payload{}, &errBundleTooLarge{raw: rawLen, compressed: len(gz), limit: partSize, parts: n, maxParts: maxParts}
	}
	if mainBudget < indexReserve {
		// The Rego bundle leaves no room for the index.
		return payload{}, &errBundleTooLarge{raw: rawLen, compressed: len(gz), limit: mainBudget}
	}
	return payload{revision: revision, chunks: &chunks{gz: gz, partSize: partSize}, size: len(gz)}, nil
}

// indexed returns p with its parts cut and named for the bundle ConfigMap
// configMap, and their index in data. A payload without chunks, or one
// already indexed, is returned as it is.
func (p payload) indexed(configMap string) payload {
	if p.chunks == nil || p.chunks.index != nil {
		return p
	}
	ix, parts, err := bundle.Split(configMap, p.revision, p.chunks.gz, p.chunks.partSize)
	if err != nil {
		panic(err) // renderChunks checked the number of parts
	}
	c := *p.chunks
	c.index, c.parts = ix.Marshal(), parts
	for _, part := range ix.Parts {
		c.names = append(c.names, part.Name)
	}
	p.chunks = &c
	p.data = maps.Clone(p.data)
	if p.data == nil {
		p.data = map[string]string{}
	}
	p.data[bundle.IndexKey] = string(c.index)
	return p
}

// partCount is how many parts p is stored in (0: none).
func (p payload) partCount() int {
	if p.chunks == nil {
		return 0
	}
	return len(p.chunks.names)
}

// withIndexSignature signs p's index, when it has one, with the counter of
// its document signature docSig.
func withIndexSignature(p payload, ring *bundle.Keyring, ns string, docSig []byte) payload {
	if p.chunks == nil || p.chunks.index == nil {
		return p
	}
	p.data[bundle.IndexSignatureKey] = string(ring.SealIndex(ns, p.chunks.index, docSig, time.Now()))
	return p
}

// partsIn is how many parts the index in cm names (0: none, or an index
// that does not parse, whose parts nobody can find anyway).
func partsIn(cm *corev1.ConfigMap) int {
	raw, ok := cm.Data[bundle.IndexKey]
	if !ok {
		return 0
	}
	ix, err := bundle.ParseIndex([]byte(raw), cm.Name)
	if err != nil {
		return 0
	}
	return len(ix.Parts)
}

// writeParts writes p's parts (if any) before the index that names them,
// and returns how many parts the bundle ConfigMap's current index names,
// whichever of this process's memory and the cache knows more: the parts
// to delete once the new index is written. A part this process already
// wrote with the same bytes is not written again.
func (r *bundleReconciler) writeParts(ctx context.Context, key types.NamespacedName, p payload) (prev int, err error) {
	var cm corev1.ConfigMap
	if err := r.client.Get(ctx, key, &cm); err == nil {
		prev = partsIn(&cm)
	} else if !apierrors.IsNotFound(err) {
		return 0, err
	}
	if n, ok := r.partsPublished.Load(key); ok {
		prev = max(prev, n.(int))
	}
	p = p.indexed(key.Name)
	for i := 0; i < p.partCount(); i++ {
		partKey := types.NamespacedName{Namespace: key.Namespace, Name: p.chunks.names[i]}
		sum := sha256.Sum256(p.chunks.parts[i])
		digest := hex.EncodeToString(sum[:])
		if d, ok := r.partsWritten.Load(partKey); ok && d.(string) == digest {
			continue
		}
		if err := r.writePart(ctx, partKey, p.revision, p.chunks.parts[i]); err != nil {
			return prev, fmt.Errorf("writing bundle part %d of %d, ConfigMap %s: %w", i+1, p.partCount(), partKey, err)
		}
		r.partsWritten.Store(partKey, digest)
	}
	return prev, nil
}

// writePart creates or updates one part ConfigMap; an immutable one (which
// the operator never writes) is deleted, that very object, and created
// anew.
func (r *bundleReconciler) writePart(ctx context.Context, key types.NamespacedName, revision string, part []byte) error {
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels:      map[string]string{BundlePartLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
		Annotations: map[string]string{v1alpha1.RevisionAnnotation: revision}},
		BinaryData: map[string][]byte{bundle.PartKey: part}}
	err := r.client.Create(ctx, want)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	var cm corev1.ConfigMap
	if err := r.apiReader.Get(ctx, key, &cm); err != nil {
		return err
	}
	if cm.Immutable != nil && *cm.Immutable {
		if err := r.client.Delete(ctx, &cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting immutable part %s to replace it: %w", key, err)
		}
		return r.client.Create(ctx, want)
	}
	if len(cm.Data) == 0 && len(cm.BinaryData) == 1 && bytes.Equal(cm.BinaryData[bundle.PartKey], part) &&
		cm.Labels[BundlePartLabel] == "true" && cm.Annotations[v1alpha1.RevisionAnnotation] == revision {
		return nil
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	maps.Copy(cm.Labels, want.Labels)
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	maps.Copy(cm.Annotations, want.Annotations)
	cm.Data, cm.BinaryData = nil, want.BinaryData
	return r.client.Update(ctx, &cm)
}

// deleteParts deletes parts from..to (from 1) of key's bundle: those the
// index written last no longer names.
func (r *bundleReconciler) deleteParts(ctx context.Context, key types.NamespacedName, from, to int) error {
	for i := from; i <= to; i++ {
		partKey := types.NamespacedName{Namespace: key.Namespace, Name: bundle.PartName(key.Name, i)}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: partKey.Namespace, Name: partKey.Name}}
		if err := client.IgnoreNotFound(r.client.Delete(ctx, cm)); err != nil {
			return fmt.Errorf("deleting bundle part %s, no longer in the index: %w", partKey, err)
		}
		r.partsWritten.Delete(partKey)
	}
	return nil
}

// publishParts wraps the write of the bundle ConfigMap (write) with its
// parts: written before it, and those of a larger earlier bundle deleted
// after it.
func (r *bundleReconciler) publishParts(ctx context.Context, key types.NamespacedName, p payload, write func() (bool, error)) (bool, error) {
	prev, err := r.writeParts(ctx, key, p)
	if err != nil {
		return false, err
	}
	written, err := write()
	if err != nil {
		return written, err
	}
	n := p.indexed(key.Name).partCount()
	r.partsPublished.Store(key, n)
	if prev > n {
		if err := r.deleteParts(ctx, key, n+1, prev); err != nil {
			return written, err
		}
	}
	return written, nil
}
