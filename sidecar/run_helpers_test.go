package sidecar

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startRun runs the whole sidecar (Run) on a loopback port and returns its
// base URL. Cleanup stops it and fails the test if Run did not return
// cleanly.
func startRun(t *testing.T, o Options) string {
	t.Helper()
	if slices.Equal(o.Listen, DefaultOptions().Listen) {
		o.Listen = []string{"127.0.0.1:0"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, len(o.Listen))
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o, func(a net.Addr) { addrs <- a }) }()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-done:
		cancel()
		t.Fatalf("Run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("Run did not start listening")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after a clean stop", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not stop")
		}
	})
	return "http://" + addr.String()
}

// metricValue reads one unlabelled series, or the sum of a labelled one's
// series, from /metrics.
func metricValue(t *testing.T, base, name string) float64 {
	t.Helper()
	_, body := get(t, base+"/metrics")
	total, found := 0.0, false
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total, found = total+v, true
	}
	if !found {
		return 0
	}
	return total
}

func readyRevision(t *testing.T, base string) string {
	t.Helper()
	status, body := get(t, base+"/readyz")
	if status != 200 {
		return ""
	}
	i := strings.Index(body, `"bundleRevision":"`)
	if i < 0 {
		t.Fatalf("readyz body without a revision: %s", body)
	}
	rest := body[i+len(`"bundleRevision":"`):]
	return rest[:strings.IndexByte(rest, '"')]
}

// fakeKubelet publishes ConfigMap volume contents the way kubelet's atomic
// writer does: a new timestamped directory, a ..data_tmp symlink renamed
// over ..data, then the top-level key symlinks, then the old directory
// removed.
type fakeKubelet struct {
	t    *testing.T
	dir  string
	gen  int
	keys []string
}

func (k *fakeKubelet) publish(files map[string][]byte) {
	k.t.Helper()
	k.writeVersion(files)
	k.swap()
	k.linkKeys(files)
}

func (k *fakeKubelet) writeVersion(files map[string][]byte) string {
	k.t.Helper()
	k.gen++
	ts := fmt.Sprintf("..2026_11_30_02_%02d_%02d.%09d", k.gen/60, k.gen%60, k.gen)
	must(k.t, os.Mkdir(filepath.Join(k.dir, ts), 0o755))
	for name, data := range files {
		must(k.t, os.WriteFile(filepath.Join(k.dir, ts, name), data, 0o644))
	}
	must(k.t, os.Symlink(ts, filepath.Join(k.dir, "..data_tmp")))
	return ts
}

// swap renames ..data_tmp over ..data: the one atomic step.
func (k *fakeKubelet) swap() (old string) {
	k.t.Helper()
	old, _ = os.Readlink(filepath.Join(k.dir, kubeletDataLink))
	must(k.t, os.Rename(filepath.Join(k.dir, "..data_tmp"), filepath.Join(k.dir, kubeletDataLink)))
	return old
}

func (k *fakeKubelet) linkKeys(files map[string][]byte) {
	k.t.Helper()
	var keys []string
	for name := range files {
		keys = append(keys, name)
		link := filepath.Join(k.dir, name)
		if _, err := os.Lstat(link); err != nil {
			must(k.t, os.Symlink(filepath.Join(kubeletDataLink, name), link))
		}
	}
	for _, name := range k.keys {
		if !slices.Contains(keys, name) {
			must(k.t, os.Remove(filepath.Join(k.dir, name)))
		}
	}
	k.keys = keys
	entries, err := os.ReadDir(k.dir)
	must(k.t, err)
	current, _ := os.Readlink(filepath.Join(k.dir, kubeletDataLink))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..20") && e.Name() != current {
			must(k.t, os.RemoveAll(filepath.Join(k.dir, e.Name())))
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
