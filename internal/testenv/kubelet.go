package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// kubeletDataLink is the symlink kubelet's atomic writer swaps to publish a
// new version of a ConfigMap volume in one rename.
const kubeletDataLink = "..data"

// Kubelet publishes ConfigMap volume contents in Dir the way kubelet's
// atomic writer does: a new timestamped directory, a ..data_tmp symlink
// renamed over ..data, then the top-level key symlinks, then the old
// directory removed.
type Kubelet struct {
	T    testing.TB
	Dir  string
	gen  int
	keys []string
}

// Publish makes files the volume's contents, in the writer's steps.
func (k *Kubelet) Publish(files map[string][]byte) {
	k.T.Helper()
	k.WriteVersion(files)
	k.Swap()
	k.LinkKeys(files)
}

// WriteVersion writes files into a new timestamped directory and points
// ..data_tmp at it.
func (k *Kubelet) WriteVersion(files map[string][]byte) string {
	k.T.Helper()
	k.gen++
	ts := fmt.Sprintf("..2026_11_30_02_%02d_%02d.%09d", k.gen/60, k.gen%60, k.gen)
	k.must(os.Mkdir(filepath.Join(k.Dir, ts), 0o755))
	for name, data := range files {
		k.must(os.WriteFile(filepath.Join(k.Dir, ts, name), data, 0o644))
	}
	k.must(os.Symlink(ts, filepath.Join(k.Dir, "..data_tmp")))
	return ts
}

// Swap renames ..data_tmp over ..data: the one atomic step.
func (k *Kubelet) Swap() (old string) {
	k.T.Helper()
	old, _ = os.Readlink(filepath.Join(k.Dir, kubeletDataLink))
	k.must(os.Rename(filepath.Join(k.Dir, "..data_tmp"), filepath.Join(k.Dir, kubeletDataLink)))
	return old
}

// LinkKeys links the top-level keys through ..data, removes the keys files
// no longer has, and removes the versions ..data no longer points at.
func (k *Kubelet) LinkKeys(files map[string][]byte) {
	k.T.Helper()
	var keys []string
	for name := range files {
		keys = append(keys, name)
		link := filepath.Join(k.Dir, name)
		if _, err := os.Lstat(link); err != nil {
			k.must(os.Symlink(filepath.Join(kubeletDataLink, name), link))
		}
	}
	for _, name := range k.keys {
		if !slices.Contains(keys, name) {
			k.must(os.Remove(filepath.Join(k.Dir, name)))
		}
	}
	k.keys = keys
	entries, err := os.ReadDir(k.Dir)
	k.must(err)
	current, _ := os.Readlink(filepath.Join(k.Dir, kubeletDataLink))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..20") && e.Name() != current {
			k.must(os.RemoveAll(filepath.Join(k.Dir, e.Name())))
		}
	}
}

func (k *Kubelet) must(err error) {
	k.T.Helper()
	if err != nil {
		k.T.Fatal(err)
	}
}
