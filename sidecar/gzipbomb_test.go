package sidecar

import (
	"bytes"
	"compress/gzip"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/bundlesource"
)

// injectedMemoryLimit is the injected sidecar's default memory limit
// (sidecarInjection.memory in the chart).
const injectedMemoryLimit = 64 << 20

// TestAttackGzipBombIsRefused: a bundle ConfigMap whose binaryData is a
// few hundred KiB of gzip that inflates to 256 MiB goes through the
// sidecar's ConfigMap load path. It is refused as corrupt, the last good
// bundle keeps deciding, and reading it allocates a bounded amount, well
// under the sidecar's memory limit (at the old 64 MiB cap, reading alone
// took more than that limit: the sidecar would be OOM-killed and restart).
func TestAttackGzipBombIsRefused(t *testing.T) {
	s, base := newTestServer(t, testOptions())
	good, goodRev := encode(t, denyTools("Bash"))
	must(t, s.loader.Load(good, false, bundlesource.OriginConfigMap))

	bomb := gzipBomb(t, 256<<20)
	// The same bomb with a trailer that claims 1000 bytes: only the
	// decompression limit stops this one.
	liar := bytes.Clone(bomb)
	copy(liar[len(liar)-4:], []byte{0xe8, 0x03, 0, 0})
	for name, raw := range map[string][]byte{"honest trailer": bomb, "lying trailer": liar} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: bundle.DefaultConfigMapName},
			BinaryData: map[string][]byte{bundle.GzipKey: raw}}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_ = s.loader.LoadConfigMap(cm)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("gzip bomb, %s: %d KiB inflating to 256 MiB; refusing it allocated %.1f MiB (cap %d MiB, sidecar limit %d MiB)",
			name, len(raw)>>10, float64(allocated)/(1<<20), bundle.MaxDocumentBytes>>20, injectedMemoryLimit>>20)
		if max := uint64(3 * bundle.MaxDocumentBytes); allocated > max {
			t.Errorf("%s: refusing the bomb allocated %d bytes, more than %d", name, allocated, max)
		}
	}
	if bundle.MaxDocumentBytes*3 > injectedMemoryLimit/2 {
		t.Errorf("MaxDocumentBytes %d leaves too little of the sidecar's %d-byte memory limit", bundle.MaxDocumentBytes, injectedMemoryLimit)
	}
	if s.Revision() != goodRev {
		t.Fatalf("serving %q after the bomb, want the last good %q", s.Revision(), goodRev)
	}
	if got := metricValue(t, base, "toolgate_sidecar_bundle_reload_failures_total"); got != 2 {
		t.Errorf("reload failures %v, want 2", got)
	}
	if got := toolDecision(t, base, "Bash"); got != "deny" {
		t.Errorf("Bash after the bomb: %s, want deny from the last good bundle", got)
	}
}

// gzipBomb compresses n zero bytes: about a thousandth of n.
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	must(t, err)
	chunk := make([]byte, 1<<20)
	for written := 0; written < n; written += len(chunk) {
		_, err := zw.Write(chunk)
		must(t, err)
	}
	must(t, zw.Close())
	return buf.Bytes()
}
