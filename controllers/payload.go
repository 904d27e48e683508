package controllers

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

// payload is what the bundle ConfigMap must carry for one bundle document.
type payload struct {
	revision   string
	data       map[string]string
	binaryData map[string][]byte
	size       int // bytes stored, compressed or not, parts included
	// chunks, when not nil, is a gzip stream too large for one ConfigMap,
	// stored in parts beside it (chunks.go); the ConfigMap itself then
	// carries their index, added once its name is known (indexed).
	chunks *chunks
}

// errBundleTooLarge means even the compressed document does not fit, or the
// document is larger than sidecars accept (compressed is then 0).
type errBundleTooLarge struct {
	raw, compressed, limit int
	// rego is the size of the Rego bundle stored beside it (0: none).
	rego int
	// parts, when not 0, is how many ConfigMaps of limit bytes each the
	// gzipped document would need (more than maxParts).
	parts, maxParts int
}

func (e *errBundleTooLarge) Error() string {
	if e.compressed == 0 {
		return fmt.Sprintf("bundle is %d bytes, more than the %d a sidecar accepts decompressed: split the namespace's policies or shorten descriptions",
			e.raw, e.limit)
	}
	if e.parts > 0 {
		return fmt.Sprintf("bundle is %d bytes (%d gzipped), more than %d ConfigMaps of %d bytes can hold (it needs %d): split the namespace's policies or shorten descriptions",
			e.raw, e.compressed, e.maxParts, e.limit, e.parts)
	}
	if e.rego > 0 {
		return fmt.Sprintf("bundle is %d bytes (%d gzipped) plus the %d-byte Rego bundle (%s, --publish-rego), more than the %d a ConfigMap can hold: split the namespace's policies, shorten descriptions, or turn off --publish-rego (Helm value manager.publishRego)",
			e.raw, e.compressed, e.rego, bundle.RegoTarKey, e.limit)
	}
	return fmt.Sprintf("bundle is %d bytes (%d gzipped), more than the %d a ConfigMap can hold: split the namespace's policies or shorten descriptions",
		e.raw, e.compressed, e.limit)
}

// renderPayload stores small documents as text, so `kubectl get -o yaml`
// shows them, and larger ones gzipped in binaryData.
// A document past bundle.MaxDocumentBytes is never published, however well
// it compresses: sidecars refuse it. regoTar, when not nil, is stored
// beside it (bundle.RegoTarKey) and counts against maxStored.
func renderPayload(doc []byte, revision string, compressAbove, maxStored, maxParts int, regoTar []byte) (payload, error) {
	if len(doc) > bundle.MaxDocumentBytes {
		return payload{}, &errBundleTooLarge{raw: len(doc), limit: bundle.MaxDocumentBytes}
	}
	p, err := renderDocument(doc, revision, compressAbove, maxStored-len(regoTar), maxStored, maxParts)
	var tooLarge *errBundleTooLarge
	if errors.As(err, &tooLarge) && tooLarge.parts == 0 {
		tooLarge.limit, tooLarge.rego = maxStored, len(regoTar)
	}
	if err != nil || regoTar == nil {
		return p, err
	}
	p.binaryData = maps.Clone(p.binaryData)
	if p.binaryData == nil {
		p.binaryData = map[string][]byte{}
	}
	p.binaryData[bundle.RegoTarKey] = regoTar
	p.size += len(regoTar)
	return p, nil
}

// renderDocument stores the document within maxStored bytes of the
// bundle ConfigMap or, gzipped, in at most maxParts parts of partSize bytes
// beside it.
func renderDocument(doc []byte, revision string, compressAbove, maxStored, partSize, maxParts int) (payload, error) {
	if len(doc) <= compressAbove && len(doc) <= maxStored {
		return payload{revision: revision, data: map[string]string{bundle.Key: string(doc)}, size: len(doc)}, nil
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return payload{}, err
	}
	// No name and no modification time in the header: equal documents must
	// compress to equal bytes, or every restart would rewrite the bundle.
	if _, err := zw.Write(doc); err != nil {
		return payload{}, err
	}
	if err := zw.Close(); err != nil {
		return payload{}, err
	}
	if buf.Len() > maxStored {
		return renderChunks(len(doc), buf.Bytes(), revision, maxStored, partSize, maxParts)
	}
	return payload{revision: revision, binaryData: map[string][]byte{bundle.GzipKey: buf.Bytes()}, size: buf.Len()}, nil
}

// upToDate tells whether cm already carries p exactly: a hand-edited or
// relabelled ConfigMap is not, and gets rewritten.
func upToDate(cm *corev1.ConfigMap, p payload) bool {
	return cm.Annotations[v1alpha1.RevisionAnnotation] == p.revision &&
		cm.Labels[v1alpha1.BundleLabel] == "true" && cm.Labels[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue &&
		maps.Equal(cm.Data, p.data) &&
		maps.EqualFunc(cm.BinaryData, p.binaryData, bytes.Equal)
}

// applyPayload makes cm carry p, keeping labels and annotations others added.
func applyPayload(cm *corev1.ConfigMap, p payload) {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[v1alpha1.BundleLabel] = "true"
	cm.Labels[v1alpha1.ManagedByLabel] = v1alpha1.ManagedByValue
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[v1alpha1.RevisionAnnotation] = p.revision
	cm.Data = maps.Clone(p.data)
	cm.BinaryData = maps.Clone(p.binaryData)
}
