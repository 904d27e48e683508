package controllers

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRenderPayload(t *testing.T) {
	small := []byte(`{"schemaVersion":1}`)
	p, err := renderPayload(small, "sha256:1", 100, 1000, 0, nil)
	if err != nil || p.data[bundle.Key] != string(small) || p.binaryData != nil || p.size != len(small) {
		t.Fatalf("small: %+v, %v", p, err)
	}

	compressible := []byte(strings.Repeat("deny the tool ", 100))
	p, err = renderPayload(compressible, "sha256:2", 100, 1000, 0, nil)
	if err != nil || p.data != nil || !bytes.Equal(gunzip(t, p.binaryData[bundle.GzipKey]), compressible) {
		t.Fatalf("compressible: %+v, %v", p, err)
	}
	again, _ := renderPayload(compressible, "sha256:2", 100, 1000, 0, nil)
	if !bytes.Equal(again.binaryData[bundle.GzipKey], p.binaryData[bundle.GzipKey]) {
		t.Fatal("equal documents compressed to different bytes: every restart would rewrite the bundle")
	}

	// Below the compression threshold but above the limit: still compressed.
	p, err = renderPayload(compressible, "sha256:3", 10_000, 1000, 0, nil)
	if err != nil || p.binaryData == nil {
		t.Fatalf("over the limit, under the threshold: %+v, %v", p, err)
	}

	noise := make([]byte, 3000)
	_, _ = rand.Read(noise)
	doc := []byte(base64.StdEncoding.EncodeToString(noise))
	_, err = renderPayload(doc, "sha256:4", 100, 1000, 0, nil)
	var tooLarge *errBundleTooLarge
	if !errors.As(err, &tooLarge) || tooLarge.raw != len(doc) || tooLarge.compressed <= 1000 || tooLarge.limit != 1000 {
		t.Fatalf("incompressible: %v", err)
	}

	// Compresses to almost nothing, but sidecars refuse to inflate it.
	huge := bytes.Repeat([]byte("do not run this tool "), bundle.MaxDocumentBytes/21+1)
	_, err = renderPayload(huge, "sha256:5", DefaultCompressAbove, DefaultMaxStoredBytes, 0, nil)
	if !errors.As(err, &tooLarge) || tooLarge.limit != bundle.MaxDocumentBytes || !strings.Contains(err.Error(), "a sidecar accepts decompressed") {
		t.Fatalf("%d bytes that gzip well: %v, want BundleTooLarge at bundle.MaxDocumentBytes", len(huge), err)
	}
	if _, err := renderPayload(huge[:bundle.MaxDocumentBytes], "sha256:6", DefaultCompressAbove, DefaultMaxStoredBytes, 0, nil); err != nil {
		t.Fatalf("exactly bundle.MaxDocumentBytes: %v", err)
	}
}

// The Rego bundle is stored beside the document and counts against the
// same limit: the document is compressed sooner, and past the limit the
// error says the Rego bundle is included.
func TestRenderPayloadCountsTheRegoBundle(t *testing.T) {
	doc := []byte(strings.Repeat("deny the tool ", 50)) // 700 bytes, gzips well
	tar := bytes.Repeat([]byte{0xff}, 400)
	p, err := renderPayload(doc, "sha256:1", 10_000, 1000, 0, tar)
	if err != nil || p.data != nil || !bytes.Equal(p.binaryData[bundle.RegoTarKey], tar) || p.size != len(p.binaryData[bundle.GzipKey])+len(tar) {
		t.Fatalf("700 bytes and a 400-byte tar under 1000: want the document gzipped beside the tar, got %+v, %v", p, err)
	}
	if p, err = renderPayload(doc, "sha256:1", 10_000, 1100, 0, tar); err != nil || p.data[bundle.Key] != string(doc) || p.size != len(doc)+len(tar) {
		t.Fatalf("700 bytes and a 400-byte tar under 1100: want the document as text, got %+v, %v", p, err)
	}
	_, err = renderPayload(doc, "sha256:1", 10_000, 1000, 0, bytes.Repeat([]byte{0xff}, 990))
	var tooLarge *errBundleTooLarge
	if !errors.As(err, &tooLarge) || tooLarge.limit != 1000 || tooLarge.rego != 990 ||
		!strings.Contains(err.Error(), "Rego bundle") || !strings.Contains(err.Error(), "--publish-rego") {
		t.Fatalf("past the limit with the tar: %v", err)
	}
	if _, err := renderPayload(doc, "sha256:1", 10_000, 1000, 0, nil); err != nil {
		t.Fatalf("the same document without the tar: %v", err)
	}
}

func TestUpToDate(t *testing.T) {
	p, _ := renderPayload([]byte(`{"a":1}`), "sha256:1", 100, 1000, 0, nil)
	fresh := func() *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		applyPayload(cm, p)
		return cm
	}
	if !upToDate(fresh(), p) {
		t.Fatal("a ConfigMap just written is not up to date")
	}
	edits := map[string]func(*corev1.ConfigMap){
		"revision":      func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.RevisionAnnotation] = "x" },
		"no annotation": func(cm *corev1.ConfigMap) { cm.Annotations = nil },
		"data":          func(cm *corev1.ConfigMap) { cm.Data[bundle.Key] = "{}" },
		"extra key":     func(cm *corev1.ConfigMap) { cm.Data["x"] = "" },
		"binaryData":    func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{bundle.GzipKey: nil} },
		"no data":       func(cm *corev1.ConfigMap) { cm.Data = nil },
		"bundle label":  func(cm *corev1.ConfigMap) { delete(cm.Labels, v1alpha1.BundleLabel) },
		"managed-by":    func(cm *corev1.ConfigMap) { cm.Labels[v1alpha1.ManagedByLabel] = "helm" },
	}
	for name, edit := range edits {
		cm := fresh()
		edit(cm)
		if upToDate(cm, p) {
			t.Errorf("%s edited by hand, but judged up to date", name)
		}
		applyPayload(cm, p)
		if name != "extra key" && !upToDate(cm, p) {
			t.Errorf("%s: applyPayload did not restore it", name)
		}
	}
	cm := fresh()
	cm.Labels["team"] = "a"
	cm.Annotations["note"] = "b"
	if !upToDate(cm, p) {
		t.Error("labels and annotations others added must not force a rewrite")
	}
}
