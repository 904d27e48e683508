package sidecar

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

// fileOnlyOptions keeps the poll interval long, so a reload in these tests
// can only have come from a file system event.
func fileOnlyOptions() Options {
	o := testOptions()
	o.PollInterval = time.Hour
	return o
}

func TestBundleDirFollowsKubeletSymlinkSwaps(t *testing.T) {
	dir := t.TempDir()
	kubelet := &testenv.Kubelet{T: t, Dir: dir}
	o := fileOnlyOptions()
	o.BundleDir = dir
	base := startRun(t, o)

	if got := toolDecision(t, base, "Bash"); got != "deny/NO_POLICIES" {
		t.Fatalf("empty volume: %s, want deny/NO_POLICIES", got)
	}
	a, revA := encode(t, denyTools("Bash"))
	kubelet.Publish(map[string][]byte{bundle.Key: a})
	eventually(t, "bundle A", func() bool { return readyRevision(t, base) == revA })
	if got := toolDecision(t, base, "Bash"); got != "deny" {
		t.Errorf("Bash under A: %s", got)
	}

	// The operator switched to the compressed key: a different file name.
	b, revB := encode(t, denyTools("Read"))
	kubelet.Publish(map[string][]byte{bundle.GzipKey: gzipped(t, b)})
	eventually(t, "bundle B (gzip)", func() bool { return readyRevision(t, base) == revB })
	if got := toolDecision(t, base, "Bash") + " " + toolDecision(t, base, "Read"); got != "allow deny" {
		t.Errorf("Bash, Read under B: %s", got)
	}
	if n := metricValue(t, base, "toolgate_sidecar_bundle_reloads_total"); n != 2 {
		t.Errorf("reloads_total = %v after two publishes, want 2 (no unload in between)", n)
	}

	kubelet.Publish(map[string][]byte{bundle.Key: []byte(`{"schemaVersion":1,"policies":[`)})
	eventually(t, "the corrupt bundle's rejection", func() bool {
		return metricValue(t, base, "toolgate_sidecar_bundle_reload_failures_total") >= 1
	})
	if readyRevision(t, base) != revB || toolDecision(t, base, "Read") != "deny" {
		t.Error("a corrupt publish replaced the last good bundle")
	}

	kubelet.Publish(map[string][]byte{}) // the ConfigMap was deleted (optional volume)
	eventually(t, "unload", func() bool { return readyRevision(t, base) == "" })
	if got := toolDecision(t, base, "Read"); got != "deny/NO_POLICIES" {
		t.Errorf("after the bundle vanished: %s, want deny/NO_POLICIES", got)
	}

	kubelet.Publish(map[string][]byte{bundle.Key: a})
	eventually(t, "bundle A again", func() bool { return readyRevision(t, base) == revA })
}

func TestBundleFileFollowsWritesRenamesAndRemoval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bundle.json")
	o := fileOnlyOptions()
	o.BundleFile = path
	base := startRun(t, o)
	if got := toolDecision(t, base, "Bash"); got != "deny/NO_POLICIES" {
		t.Fatalf("no file yet: %s", got)
	}

	a, revA := encode(t, denyTools("Bash"))
	tmp := filepath.Join(dir, ".bundle.json.tmp")
	must(t, os.WriteFile(tmp, a, 0o644))
	must(t, os.Rename(tmp, path))
	eventually(t, "bundle A (renamed into place)", func() bool { return readyRevision(t, base) == revA })

	b, revB := encode(t, denyTools("Read"))
	must(t, os.WriteFile(path, b, 0o644))
	eventually(t, "bundle B (written in place)", func() bool { return readyRevision(t, base) == revB })

	must(t, os.WriteFile(path, []byte("not json"), 0o644))
	eventually(t, "the corrupt file's rejection", func() bool {
		return metricValue(t, base, "toolgate_sidecar_bundle_reload_failures_total") >= 1
	})
	if readyRevision(t, base) != revB {
		t.Error("a corrupt file replaced the last good bundle")
	}

	must(t, os.Remove(path))
	eventually(t, "unload", func() bool { return readyRevision(t, base) == "" })
	if got := toolDecision(t, base, "Read"); got != "deny/NO_POLICIES" {
		t.Errorf("file removed: %s", got)
	}
}

func TestBundleFileGzip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bundle.json.gz")
	a, revA := encode(t, denyTools("Bash"))
	must(t, os.WriteFile(path, gzipped(t, a), 0o644))
	o := fileOnlyOptions()
	o.BundleFile = path
	base := startRun(t, o)
	eventually(t, "the gzip bundle", func() bool { return readyRevision(t, base) == revA })
}

func TestBundleFilePollsWithoutEvents(t *testing.T) {
	// A bundle file that is a symlink into another directory gets no
	// events for its target's changes; the poll must pick them up.
	target := filepath.Join(t.TempDir(), "bundle.json")
	a, revA := encode(t, denyTools("Bash"))
	must(t, os.WriteFile(target, a, 0o644))

	other := t.TempDir()
	must(t, os.Symlink(target, filepath.Join(other, "bundle.json")))
	o := testOptions()
	o.BundleFile = filepath.Join(other, "bundle.json")
	o.PollInterval = 50 * time.Millisecond
	base := startRun(t, o)
	eventually(t, "bundle A", func() bool { return readyRevision(t, base) == revA })
	b, revB := encode(t, denyTools("Read"))
	must(t, os.WriteFile(target, b, 0o644)) // no event in the watched directory
	eventually(t, "bundle B by polling", func() bool { return readyRevision(t, base) == revB })
}
