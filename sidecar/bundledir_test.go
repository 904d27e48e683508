package sidecar

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBundleDirOfManifestsRefusesToStart: --bundle-dir pointed at Policy
// manifests (what `toolgate hook` and `mcp stdio` take under the same flag)
// used to answer NO_POLICIES forever without a word. The sidecar now
// refuses to start and says how to serve them.
func TestBundleDirOfManifestsRefusesToStart(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"yaml":  {"policy.yaml": "# team policy\napiVersion: toolgate.dev/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec: {rules: []}\n"},
		"json":  {"p.json": `{"kind":"Policy","apiVersion":"toolgate.dev/v1alpha1","metadata":{"name":"p"}}`},
		"mixed": {"a.yml": "apiVersion: v1\nkind: ConfigMap\n---\napiVersion: \"toolgate.dev/v1alpha1\"\nkind: FrozenAgent\n", "README.md": "notes"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := testenv.WriteTree(t, files)
			o := testOptions()
			o.BundleDir = dir
			o.Listen = []string{"127.0.0.1:0"}
			// Started, it would serve until stopped: stop it once it listens.
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			err := Run(ctx, o, func(net.Addr) { cancel() })
			if err == nil {
				t.Fatal("Run started on a directory of manifests")
			}
			for _, want := range []string{"--bundle-dir " + dir, "toolgate manifests", "toolgate bundle -f " + dir, "--bundle-file"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestBundleDirSaysWhatItLoadedAtStart: the sidecar logs at start what
// --bundle-dir holds: a bundle key, or none yet (an optional ConfigMap
// volume not published to: decisions deny NO_POLICIES until it is). Other
// YAML (not toolgate's) next to a bundle does not stop it.
func TestBundleDirSaysWhatItLoadedAtStart(t *testing.T) {
	raw, _ := encode(t, denyTools("Bash"))
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"bundle": {map[string]string{bundle.Key: string(raw), "other.yaml": "apiVersion: v1\nkind: ConfigMap\n"}, `keys=[bundle.json]`},
		"gzip":   {map[string]string{bundle.GzipKey: string(gzipped(t, raw))}, `keys=[bundle.json.gz]`},
		"empty":  {map[string]string{}, `keys=[] note="no bundle.json or bundle.json.gz yet`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := testenv.WriteTree(t, tc.files)
			var logs lineBuffer
			o := testOptions()
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			o.BundleDir = dir
			startRun(t, o)
			line := ""
			for l := range strings.SplitSeq(logs.String(), "\n") {
				if strings.Contains(l, "bundle source") {
					line = l
				}
			}
			if !strings.Contains(line, "dir="+filepath.Clean(dir)) || !strings.Contains(line, tc.want) {
				t.Errorf("start log %q, want dir and %q; all logs:\n%s", line, tc.want, logs.String())
			}
		})
	}
}
