package bundle

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/engine"
)

func TestFromConfigMapAndReadDocument(t *testing.T) {
	t.Parallel()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"doc":1}`))
	_ = zw.Close()
	tests := []struct {
		name    string
		cm      corev1.ConfigMap
		want    string
		wantErr string
	}{
		{"plain", corev1.ConfigMap{Data: map[string]string{Key: `{"doc":0}`}}, `{"doc":0}`, ""},
		{"gzip", corev1.ConfigMap{BinaryData: map[string][]byte{GzipKey: gz.Bytes()}}, `{"doc":1}`, ""},
		{"both", corev1.ConfigMap{Data: map[string]string{Key: "{}"}, BinaryData: map[string][]byte{GzipKey: gz.Bytes()}}, "", "refusing to guess"},
		{"neither", corev1.ConfigMap{Data: map[string]string{"other": "{}"}}, "", "has neither"},
		{"bad gzip", corev1.ConfigMap{BinaryData: map[string][]byte{GzipKey: []byte("not gzip")}}, "", "gzip"},
	}
	for _, tt := range tests {
		raw, gzipped, err := FromConfigMap(&tt.cm)
		var doc []byte
		if err == nil {
			doc, err = ReadDocument(raw, gzipped)
			if err != nil && !errors.Is(err, engine.ErrCorruptBundle) {
				t.Errorf("%s: %v does not wrap ErrCorruptBundle", tt.name, err)
			}
		}
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || string(doc) != tt.want):
			t.Errorf("%s: %q, %v; want %q", tt.name, doc, err, tt.want)
		}
	}
}
