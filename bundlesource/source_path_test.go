package bundlesource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBundleDirReadDuringASwapSeesOneVersion freezes kubelet between its
// steps: after ..data moved but before the key symlinks changed, the
// top-level bundle.json dangles and bundle.json.gz does not exist yet.
// Reading through ..data must still see the new version, not "deleted".
func TestBundleDirReadDuringASwapSeesOneVersion(t *testing.T) {
	dir := t.TempDir()
	k := &testenv.Kubelet{T: t, Dir: dir}
	a, _ := testenv.Encode(t, testenv.DenyTools("Bash"))
	k.Publish(map[string][]byte{bundle.Key: a})

	b, _ := testenv.Encode(t, testenv.DenyTools("Read"))
	zb := testenv.Gzipped(t, b)
	k.WriteVersion(map[string][]byte{bundle.GzipKey: zb})
	old := k.Swap()
	must(t, os.RemoveAll(filepath.Join(dir, old)))
	if _, err := os.Stat(filepath.Join(dir, bundle.Key)); !os.IsNotExist(err) {
		t.Fatalf("the test did not reach the dangling state: %v", err)
	}
	raw, _, gz, found, err := readBundleDir(dir)
	if err != nil || !found || !gz || string(raw) != string(zb) {
		t.Errorf("mid-swap read: found=%v gz=%v err=%v, want the new gzip bundle", found, gz, err)
	}
}

func TestBundleDirWithBothKeysIsRejected(t *testing.T) {
	dir := t.TempDir()
	a, _ := testenv.Encode(t, testenv.DenyTools("Bash"))
	(&testenv.Kubelet{T: t, Dir: dir}).Publish(map[string][]byte{bundle.Key: a, bundle.GzipKey: testenv.Gzipped(t, a)})
	if _, _, _, _, err := readBundleDir(dir); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("both keys: err %v", err)
	}
	plain := t.TempDir() // no ..data: read the files directly
	must(t, os.WriteFile(filepath.Join(plain, bundle.Key), a, 0o644))
	if raw, _, gz, found, err := readBundleDir(plain); err != nil || !found || gz || string(raw) != string(a) {
		t.Errorf("plain directory: found=%v gz=%v err=%v", found, gz, err)
	}
}
