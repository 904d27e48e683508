package sidecar

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/bundlesource"
	"github.com/toolgate/toolgate/engine"
)

func TestCorruptBundlesAreRejectedAndTheLastGoodOneServes(t *testing.T) {
	s, base := newTestServer(t, testOptions())
	good, goodRev := encode(t, denyTools("Bash"))
	if err := s.LoadDocument(good, false); err != nil {
		t.Fatal(err)
	}
	other, _ := encode(t, denyTools("Read"))
	v2 := bytes.Replace(other, []byte(`"schemaVersion":1`), []byte(`"schemaVersion":2`), 1)
	tampered := bytes.Replace(other, []byte(`"Read"`), []byte(`"Edit"`), 1) // content no longer matches its revision
	gz := gzipped(t, other)
	cases := []struct {
		name    string
		raw     []byte
		gzipped bool
	}{
		{"empty", nil, false},
		{"bad JSON", []byte(`{"schemaVersion":1,`), false},
		{"truncated", other[:len(other)/2], false},
		{"not an object", []byte(`[1,2]`), false},
		{"unknown field", []byte(`{"schemaVersion":1,"policies":[],"frozenAgents":[],"extra":1}`), false},
		{"unknown schema version", v2, false},
		{"revision mismatch", tampered, false},
		{"no revision", bytes.Replace(other, []byte(`"revision"`), []byte(`"revisio"`), 1), false},
		{"trailing data", append(append([]byte(nil), other...), []byte(` {}`)...), false},
		{"gzip flag on plain JSON", other, true},
		{"truncated gzip", gz[:len(gz)-10], true},
		{"gzip of bad JSON", gzipped(t, []byte(`{"schemaVersion":`)), true},
		{"gzip bomb", gzipped(t, make([]byte, bundle.MaxDocumentBytes+1)), true},
	}
	for i, tc := range cases {
		err := s.loader.Load(tc.raw, tc.gzipped, bundlesource.OriginBundleFile)
		if !errors.Is(err, engine.ErrCorruptBundle) {
			t.Errorf("%s: err %v, want a corrupt-bundle error", tc.name, err)
		}
		if got := testutil.ToFloat64(s.metrics.bundle.ReloadFailures.WithLabelValues(bundlesource.OriginBundleFile)); got != float64(i+1) {
			t.Errorf("%s: reload failures %v, want %d", tc.name, got, i+1)
		}
		if s.Revision() != goodRev {
			t.Fatalf("%s: serving %q, want the last good %q", tc.name, s.Revision(), goodRev)
		}
	}
	if got := toolDecision(t, base, "Bash"); got != "deny" {
		t.Errorf("Bash after the rejects: %s, want deny from the last good bundle", got)
	}
	if got := toolDecision(t, base, "Read"); got != "allow" {
		t.Errorf("Read after the rejects: %s, want allow from the last good bundle", got)
	}

	if err := s.loader.Load(gz, true, bundlesource.OriginBundleFile); err != nil {
		t.Fatalf("a good gzip bundle: %v", err)
	}
	if got := toolDecision(t, base, "Read"); got != "deny" {
		t.Errorf("Read after loading the gzip bundle: %s, want deny", got)
	}
}

func TestReloadingTheSameRevisionKeepsTheCompiledBundle(t *testing.T) {
	s, _ := newTestServer(t, testOptions())
	doc, _ := encode(t, denyTools("Bash"))
	for range 3 {
		if err := s.LoadDocument(doc, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(s.metrics.bundle.Reloads); got != 1 {
		t.Errorf("reloads_total = %v after loading one revision three times, want 1", got)
	}
}

func TestCacheServesTheLastGoodBundleAtStart(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.CacheDir = filepath.Join(dir, "cache")
	o.ConfigMap = "team-a/toolgate-bundle"
	first, _ := newTestServer(t, o)
	doc, rev := encode(t, denyTools("Bash"))
	if err := first.loader.Load(doc, false, bundlesource.OriginConfigMap); err != nil {
		t.Fatal(err)
	}

	second, base := newTestServer(t, o)
	second.loader.LoadCache()
	if second.Revision() != rev {
		t.Fatalf("restarted server serves %q, want the cached %q", second.Revision(), rev)
	}
	if _, body := get(t, base+"/readyz"); !strings.Contains(body, `"source":"cache"`) {
		t.Errorf("readyz does not say the bundle came from the cache: %s", body)
	}
	// The source confirming the same revision is not a reload.
	if err := second.loader.Load(doc, false, bundlesource.OriginConfigMap); err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, base+"/readyz"); !strings.Contains(body, `"source":"configmap"`) {
		t.Errorf("readyz after the source confirmed: %s", body)
	}

	o2 := o
	o2.ConfigMap = "team-b/toolgate-bundle"
	elsewhere, _ := newTestServer(t, o2)
	elsewhere.loader.LoadCache()
	if elsewhere.Ready() {
		t.Error("a sidecar for another ConfigMap loaded this one's cache")
	}

	second.loader.Unload(bundlesource.OriginConfigMap, "deleted")
	third, _ := newTestServer(t, o)
	third.loader.LoadCache()
	if third.Ready() {
		t.Error("the cache survived the bundle's deletion")
	}

	if err := os.WriteFile(filepath.Join(o.CacheDir, bundlesource.CacheFileName(o.sourceConfig())), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	fourth, _ := newTestServer(t, o)
	fourth.loader.LoadCache()
	if fourth.Ready() || testutil.ToFloat64(fourth.metrics.bundle.ReloadFailures.WithLabelValues(bundlesource.OriginCache)) != 1 {
		t.Error("a corrupt cache was not rejected and counted")
	}
}
