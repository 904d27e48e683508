package sidecar

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServesOnAUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "toolgate.sock")
	stale, err := net.Listen("unix", sock) // a socket left by a crashed process
	must(t, err)
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	must(t, stale.Close())

	bundle := filepath.Join(dir, "bundle.json")
	doc, _ := encode(t, denyTools("Bash"))
	must(t, os.WriteFile(bundle, doc, 0o644))
	o := testOptions()
	o.Listen, o.BundleFile = []string{"unix:" + sock}, bundle
	startRun(t, o)

	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	resp, err := client.Post("http://sidecar/v1/evaluate", "application/json", strings.NewReader(`{"tool_name":"Bash"}`))
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if d := decodeDecision(t, body); resp.StatusCode != 200 || d.Decision != "deny" {
		t.Errorf("over the socket: %d %s", resp.StatusCode, body)
	}
}

func TestRunRefusesToReplaceANonSocketFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "important.txt")
	must(t, os.WriteFile(path, []byte("keep me"), 0o600))
	o := testOptions()
	o.Listen, o.BundleFile = []string{"unix:" + path}, filepath.Join(t.TempDir(), "b.json")
	err := Run(t.Context(), o, nil)
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Run on a regular file's path: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "keep me" {
		t.Error("the file was touched")
	}
}

func TestRunFailsWhenItsSourceCannotBeWatched(t *testing.T) {
	o := testOptions()
	o.Listen, o.BundleDir = []string{"127.0.0.1:0"}, filepath.Join(t.TempDir(), "missing")
	if err := Run(t.Context(), o, nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Run with a missing --bundle-dir: %v", err)
	}
}

func TestRunFailsWhenTheAddressIsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	o := testOptions()
	o.Listen, o.BundleFile = []string{ln.Addr().String()}, filepath.Join(t.TempDir(), "b.json")
	if err := Run(t.Context(), o, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Run on a taken port: %v", err)
	}
}
