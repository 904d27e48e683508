package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/manifest"
	"github.com/toolgate/toolgate/rego"
)

const exportNow = "2026-11-15T12:00:00Z"

// The directory holds .manifest, toolgate/policy.rego and data.json: the
// exporter's output for the bundle `toolgate bundle` prints.
func TestExportRegoDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	o := run(t, "", "export", "rego", "-f", samplesDir, "--now", exportNow, "-o", dir)
	if o.code != 0 || o.stderr != "" || o.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	want := exportSamples(t)
	for _, f := range want.Files() {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f[0])))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != f[1] {
			t.Errorf("%s is not rego.Export of the samples' bundle", f[0])
		}
	}
	if !strings.Contains(string(want.Manifest), want.Revision) || !strings.HasPrefix(want.Revision, "sha256:") {
		t.Errorf("the manifest does not carry the bundle's revision: %s", want.Manifest)
	}
}

// --bundle-file exports a built bundle: the same Rego as from its manifests.
func TestExportRegoFromBundleFile(t *testing.T) {
	o := run(t, "", "bundle", "-f", samplesDir, "--now", exportNow)
	if o.code != 0 {
		t.Fatalf("bundle: exit %d %s", o.code, o.stderr)
	}
	file := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(file, []byte(o.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	o = run(t, "", "export", "rego", "--bundle-file", file, "--tar", "-o", "-")
	want, _ := exportSamples(t).Tar(nil)
	if o.code != 0 || o.stdout != string(want) {
		t.Errorf("exit %d (%s): the export of the bundle file differs from the export of its manifests", o.code, o.stderr)
	}
}

func exportSamples(t *testing.T) *rego.Bundle {
	t.Helper()
	set, err := manifest.Load([]string{samplesDir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now, _ := parseNow(exportNow)
	b := bundle.Build(set.PolicyObjects(), set.FrozenAgentObjects(), now)
	if _, b.Revision, err = engine.Encode(b); err != nil {
		t.Fatal(err)
	}
	out, err := rego.Export(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// --tar writes the gzipped tar OPA's bundle plugin loads, to a file or stdout.
func TestExportRegoTar(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bundle.tar.gz")
	o := run(t, "", "export", "rego", "-f", samplesDir, "--now", exportNow, "--tar", "-o", file)
	if o.code != 0 || o.stderr != "" {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := exportSamples(t).Tar(nil)
	if !bytes.Equal(doc, want) {
		t.Error("the tar file is not the exported bundle's tar")
	}
	_, files := testenv.Untar(t, doc, "")
	if len(files) != 3 || files["/.manifest"] == "" || !strings.HasPrefix(files["/toolgate/policy.rego"], "# Generated") || files["/data.json"] == "" {
		t.Errorf("tar holds %d files: %v", len(files), keys(files))
	}
	o = run(t, "", "export", "rego", "-f", samplesDir, "--now", exportNow, "--tar", "-o", "-")
	if o.code != 0 || o.stdout != string(want) {
		t.Errorf("--tar -o -: exit %d, %d bytes on stdout, want %d", o.code, len(o.stdout), len(want))
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestExportRegoErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	unexportable := filepath.Join(dir, "greek.yaml")
	if err := os.WriteFile(unexportable, []byte(`apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: greek}
spec:
  rules:
  - id: no-greek
    effect: deny
    conditions: [{field: input.text, operator: matches, value: '\p{Greek}'}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no format", []string{"export"}, exitcode.Usage, "name a format: toolgate export rego"},
		{"unknown format", []string{"export", "wasm"}, exitcode.Usage, `unknown format "wasm": use toolgate export rego`},
		{"no -f", []string{"export", "rego", "-o", dir}, exitcode.Usage, "-f PATH is required"},
		{"no -o", []string{"export", "rego", "-f", samplesDir}, exitcode.Usage, "-o is required"},
		{"stdout without --tar", []string{"export", "rego", "-f", samplesDir, "-o", "-"}, exitcode.Usage, "only --tar can"},
		{"directory onto a file", []string{"export", "rego", "-f", samplesDir, "-o", file}, exitcode.Usage, "is a file, not a directory"},
		{"tar onto a directory", []string{"export", "rego", "-f", samplesDir, "--tar", "-o", dir}, exitcode.Usage, "is a directory"},
		{"bad namespace", []string{"export", "rego", "-f", samplesDir, "-n", "Not_A_Namespace", "-o", dir}, exitcode.Usage, "is not a namespace name"},
		{"bad --now", []string{"export", "rego", "-f", samplesDir, "--now", "tomorrow", "-o", dir}, exitcode.Usage, "not an RFC 3339 time"},
		{"missing manifests", []string{"export", "rego", "-f", filepath.Join(dir, "nope"), "-o", dir}, exitcode.Usage, "nope"},
		{"unknown flag", []string{"export", "rego", "--zip"}, exitcode.Usage, "unknown flag: --zip"},
		{"bundle file and manifests", []string{"export", "rego", "--bundle-file", file, "-f", samplesDir, "-o", dir}, exitcode.Usage, "--bundle-file exports a built bundle"},
		{"corrupt bundle file", []string{"export", "rego", "--bundle-file", file, "-o", filepath.Join(dir, "out")}, exitcode.Usage, "corrupt bundle"},
		{"unexportable", []string{"export", "rego", "-f", unexportable, "-o", filepath.Join(dir, "out")}, exitcode.Problems, `policy "greek" rule "no-greek" cannot be exported to Rego`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := run(t, "", tc.args...)
			if o.code != tc.code || !strings.Contains(o.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", o.code, o.stderr, tc.code, tc.want)
			}
		})
	}
}

// --signing-key signs the tar as the operator does with --publish-rego.
func TestExportRegoTarSigned(t *testing.T) {
	ring := testenv.Keyring(t, 2)
	keyFile := filepath.Join(t.TempDir(), "keys.pem")
	if err := os.WriteFile(keyFile, ring.PrivatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	o := run(t, "", "export", "rego", "-f", samplesDir, "--now", exportNow, "--tar", "-o", "-", "--signing-key", keyFile)
	want, _ := exportSamples(t).Tar(ring.Current())
	if o.code != 0 || o.stdout != string(want) {
		t.Fatalf("exit %d (%s): not the tar signed by the first key", o.code, o.stderr)
	}
	if _, files := testenv.Untar(t, []byte(o.stdout), ""); files["/.signatures.json"] == "" {
		t.Errorf("no .signatures.json in %v", keys(files))
	}
	if o := run(t, "", "export", "rego", "-f", samplesDir, "-o", t.TempDir(), "--signing-key", keyFile); o.code != exitcode.Usage {
		t.Errorf("--signing-key without --tar: exit %d", o.code)
	}
	bad := filepath.Join(t.TempDir(), "bad.pem")
	_ = os.WriteFile(bad, ring.PublicPEM(), 0o600)
	if o := run(t, "", "export", "rego", "-f", samplesDir, "--tar", "-o", "-", "--signing-key", bad); o.code != exitcode.Usage || !strings.Contains(o.stderr, "--signing-key") {
		t.Errorf("public keys as --signing-key: exit %d %s", o.code, o.stderr)
	}
}
