package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/manifest"
)

const samplesDir = "../config/samples"

func TestBundleIsEncodeOfBuild(t *testing.T) {
	const now = "2026-11-15T12:00:00Z"
	o := run(t, "", "bundle", "-f", samplesDir, "--now", now)
	if o.code != 0 || o.stderr != "" {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
	set, err := manifest.Load([]string{samplesDir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at, _ := time.Parse(time.RFC3339, now)
	want, rev, err := engine.Encode(bundle.Build(set.PolicyObjects(), set.FrozenAgentObjects(), at))
	if err != nil {
		t.Fatal(err)
	}
	if o.stdout != string(want) {
		t.Fatalf("bundle output differs from engine.Encode(bundle.Build(...)):\n got %s\nwant %s", o.stdout, want)
	}
	b, err := engine.Decode([]byte(o.stdout))
	if err != nil {
		t.Fatalf("a sidecar would reject the output: %v", err)
	}
	if b.Revision != rev || len(b.Policies) != 6 || len(b.FrozenAgents) != 1 || b.Policies[0].ID != "default-deny-readonly" {
		t.Errorf("decoded bundle: revision %s, %d policies (first %q), %d frozen", b.Revision, len(b.Policies), b.Policies[0].ID, len(b.FrozenAgents))
	}
}

func TestBundleIsByteIdenticalAcrossRunsAndInputOrder(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(samplesDir, "*.yaml"))
	// kustomization.yaml lists the samples and the test file tests them;
	// neither is one of them.
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" || manifest.IsTestFile(f) })
	if err != nil || len(files) < 5 {
		t.Fatalf("samples: %v, %v", files, err)
	}
	args := func(paths []string) []string {
		a := []string{"bundle", "--now", "2026-11-15T12:00:00Z"}
		for _, p := range paths {
			a = append(a, "-f", p)
		}
		return a
	}
	first := run(t, "", args(files)...)
	reversed := make([]string, len(files))
	for i, f := range files {
		reversed[len(files)-1-i] = f
	}
	// The same objects, all in one multi-document file, in another order.
	var joined bytes.Buffer
	for _, f := range reversed {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		joined.WriteString("---\n")
		joined.Write(data)
	}
	for name, o := range map[string]outcome{
		"again":      run(t, "", args(files)...),
		"reversed":   run(t, "", args(reversed)...),
		"one stream": run(t, joined.String(), args([]string{"-"})...),
		"directory":  run(t, "", args([]string{samplesDir})...),
	} {
		if o.code != 0 || o.stdout != first.stdout {
			t.Errorf("%s: exit %d, output differs:\n got %s\nwant %s", name, o.code, o.stdout, first.stdout)
		}
	}
}

func TestBundleLeavesOutExpiredFreezes(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, ""), "f.yaml": frozenAgent})
	before := run(t, "", "bundle", "-f", dir, "--now", "2029-01-01T00:00:00Z")
	after := run(t, "", "bundle", "-f", dir, "--now", "2030-01-01T00:00:00Z")
	if !strings.Contains(before.stdout, `"frozenAgents":[{"id":"agent-7"`) || !strings.Contains(after.stdout, `"frozenAgents":[]`) {
		t.Errorf("before expiry: %s\nafter expiry: %s", before.stdout, after.stdout)
	}
}

func TestBundleNamespacesAndDiagnostics(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"a.yaml": strings.Replace(fmt.Sprintf(denyBashPolicy, "-a"), "name: no-bash-a", "name: no-bash-a\n  namespace: team-a", 1),
		"b.yaml": strings.Replace(strings.Replace(fmt.Sprintf(denyBashPolicy, "-b"), "name: no-bash-b", "name: no-bash-b\n  namespace: team-b", 1),
			"value: Bash", "value: {a: 1}", 1),
	})
	o := run(t, "", "bundle", "-f", dir)
	if o.code != exitcode.Usage || !strings.Contains(o.stderr, "objects from several namespaces (team-a, team-b)") || o.stdout != "" {
		t.Errorf("several namespaces: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	o = run(t, "", "bundle", "-f", dir, "-n", "team-a")
	if o.code != 0 || !strings.Contains(o.stdout, `"id":"no-bash-a"`) || strings.Contains(o.stdout, "no-bash-b") {
		t.Errorf("-n team-a: exit %d, stdout %s", o.code, o.stdout)
	}
	// A policy that does not compile is still published (the sidecar denies
	// POLICY_COMPILE_ERROR when it reaches it), and the reason is on stderr.
	o = run(t, "", "bundle", "-f", dir, "-n", "team-b")
	want := filepath.Join(dir, "b.yaml") + ":doc 1: Policy/no-bash-b: spec.rules[0].conditions[0].value: operator eq needs a string, number or boolean, not an object\n"
	if o.code != 0 || !strings.Contains(o.stdout, `"id":"no-bash-b"`) || o.stderr != want {
		t.Errorf("-n team-b: exit %d, stdout %s\nstderr %q\nwant   %q", o.code, o.stdout, o.stderr, want)
	}
}

func TestBundleInputErrors(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"})
	for _, args := range [][]string{
		{"bundle"},
		{"bundle", "-f", filepath.Join(dir, "missing")},
		{"bundle", "-f", dir},
		{"bundle", "-f", t.TempDir(), "--now", "never"},
	} {
		if o := run(t, "", args...); o.code != exitcode.Usage || o.stdout != "" || o.stderr == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, o.code, o.stdout, o.stderr)
		}
	}
	if o := run(t, "", "bundle", "-f", t.TempDir()); o.code != 0 || !strings.Contains(o.stdout, `"policies":[]`) {
		t.Errorf("empty dir: exit %d, stdout %s", o.code, o.stdout)
	}
}
