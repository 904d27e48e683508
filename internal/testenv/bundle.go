package testenv

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// WaitForBundle waits, reading through c, until namespace ns holds the
// bundle ConfigMap name and, unless ok is nil, until the bundle in it,
// read as a sidecar reads it (DecodeBundle), satisfies ok; it returns
// both (with ok nil, the ConfigMap and an empty bundle: whatever it holds
// is enough).
func WaitForBundle(t testing.TB, c client.Client, ns, name, what string, ok func(engine.Bundle) bool) (*corev1.ConfigMap, engine.Bundle) {
	t.Helper()
	var cm *corev1.ConfigMap
	var b engine.Bundle
	Eventually(t, what, func() (bool, string) {
		var got corev1.ConfigMap
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &got); apierrors.IsNotFound(err) {
			return false, "no bundle ConfigMap"
		} else if err != nil {
			return false, err.Error()
		}
		cm = &got
		if ok == nil {
			return true, ""
		}
		var err error
		if b, err = DecodeBundle(cm); err != nil {
			return false, err.Error()
		}
		return ok(b), fmt.Sprintf("bundle revision %s has %d policies and %d frozen agents", b.Revision, len(b.Policies), len(b.FrozenAgents))
	})
	return cm, b
}

// DecodeBundle reads a bundle ConfigMap as a sidecar does, checking the
// revision annotation against the document and the labels the operator
// sets.
func DecodeBundle(cm *corev1.ConfigMap) (engine.Bundle, error) {
	var doc []byte
	switch {
	case cm.Data[bundle.Key] != "" && cm.BinaryData[bundle.GzipKey] == nil:
		doc = []byte(cm.Data[bundle.Key])
	case cm.BinaryData[bundle.GzipKey] != nil && cm.Data[bundle.Key] == "":
		zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[bundle.GzipKey]))
		if err != nil {
			return engine.Bundle{}, err
		}
		if doc, err = io.ReadAll(zr); err != nil {
			return engine.Bundle{}, err
		}
	default:
		return engine.Bundle{}, fmt.Errorf("want exactly one of %s and %s, got data keys %v and binaryData keys %v",
			bundle.Key, bundle.GzipKey, slices.Sorted(maps.Keys(cm.Data)), slices.Sorted(maps.Keys(cm.BinaryData)))
	}
	b, err := engine.Decode(doc)
	if err != nil {
		return engine.Bundle{}, err
	}
	if got := cm.Annotations[v1alpha1.RevisionAnnotation]; got != b.Revision {
		return engine.Bundle{}, fmt.Errorf("annotation %s=%q, document revision %q", v1alpha1.RevisionAnnotation, got, b.Revision)
	}
	if cm.Labels[v1alpha1.BundleLabel] != "true" || cm.Labels[v1alpha1.ManagedByLabel] != "toolgate" {
		return engine.Bundle{}, fmt.Errorf("labels %v", cm.Labels)
	}
	return b, nil
}
