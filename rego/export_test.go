package rego

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/engine/request"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/manifest"
)

var update = flag.Bool("update", false, "rewrite testdata/samples from the current exporter")

// samplesBundle is the bundle of every sample applied together, as the
// operator publishes it (revision included).
func samplesBundle(t *testing.T) engine.Bundle {
	t.Helper()
	all, err := manifest.Load([]string{"../config/samples"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set, err := all.OneNamespace("")
	if err != nil {
		t.Fatal(err)
	}
	b := bundle.Build(set.PolicyObjects(), set.FrozenAgentObjects(), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	if _, b.Revision, err = engine.Encode(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSamplesGolden pins the export of config/samples; -update rewrites it.
// test/regodiff checks that OPA decides it as the engine does.
func TestSamplesGolden(t *testing.T) {
	out, err := Export(samplesBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "samples")
	if *update {
		if err := out.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range out.Files() {
		want, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f[0])))
		if err != nil {
			t.Fatalf("%v (run go test ./rego -update)", err)
		}
		if string(want) != f[1] {
			t.Errorf("%s differs from testdata/samples (run go test ./rego -update and review the diff)", f[0])
		}
	}
}

func TestExportLayout(t *testing.T) {
	out, err := Export(samplesBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Revision    string   `json:"revision"`
		Roots       []string `json:"roots"`
		RegoVersion int      `json:"rego_version"`
	}
	if err := json.Unmarshal(out.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Revision, "sha256:") || len(m.Roots) != 1 || m.Roots[0] != Root || m.RegoVersion != 1 {
		t.Errorf("manifest %s", out.Manifest)
	}
	src := string(out.Policy)
	for _, want := range []string{"package toolgate\n", `# policy "bash-no-rm-rf" rule 0 "no-rm-rf": deny`, "decision := d if {"} {
		if !strings.Contains(src, want) {
			t.Errorf("policy.rego lacks %q", want)
		}
	}
	doc, err := out.Tar(nil)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := testenv.Untar(t, doc, "")
	if got := strings.Join(names, " "); got != "/.manifest /toolgate/policy.rego /data.json" {
		t.Errorf("tar holds %s", got)
	}
	again, _ := out.Tar(nil)
	if !bytes.Equal(doc, again) {
		t.Error("the tar is not reproducible")
	}
}

// TestExportRefuses: what Rego cannot decide as the engine does is refused,
// naming the policy, the rule and why.
func TestExportRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, pattern, want string
	}{
		{"non-ASCII", "caf\u00e9", "outside ASCII"},
		{"Unicode class", `\pL+`, `uses \p`},
		{"negated class", `\PL`, `uses \P`},
		{"any byte", `a\Cb`, `uses \C`},
		{"Kelvin sign", "(?i)\u212a", "outside ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := engine.Bundle{Policies: []engine.Policy{{ID: "p", Rules: []engine.Rule{{ID: "r", Effect: "deny",
				Conditions: []engine.Condition{{Field: "input.command", Operator: "matches", Value: json.RawMessage(quote(tc.pattern))}}}}}}}
			_, err := Export(b)
			if err == nil || !strings.Contains(err.Error(), `policy "p" rule "r"`) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming the rule and %q", err, tc.want)
			}
		})
	}
	b := engine.Bundle{Policies: []engine.Policy{{ID: "p", Evaluation: "tiered", Rules: []engine.Rule{{ID: "r", Effect: "deny",
		Select: &engine.Select{Tool: `/\p{Greek}/`}}}}}}
	if _, err := Export(b); err == nil || !strings.Contains(err.Error(), "select.tool") {
		t.Errorf("select.tool: error %v", err)
	}
}

// A policy that does not compile is exported as such, without its rules.
func TestExportCompileError(t *testing.T) {
	b := engine.Bundle{Policies: []engine.Policy{{ID: "p", Rules: []engine.Rule{{ID: "r", Effect: "deny",
		Conditions: []engine.Condition{{Field: "x", Operator: "matches", Value: json.RawMessage(`"\u00e9("`)}}}}}}}
	out, err := Export(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Data), `failed to compile`) || strings.Contains(string(out.Policy), "hit contains") {
		t.Errorf("data %s\npolicy %s", out.Data, out.Policy)
	}
}

func TestFieldRefs(t *testing.T) {
	for in, want := range map[string]string{
		"input.command":   "input.input.command",
		"args.0":          `_at(input.args, "0", 0)`,
		"args.1.x":        `_key(_at(input.args, "1", 1), "x")`,
		"args.01":         `input.args["01"]`,
		"in.if":           `input["in"]["if"]`,
		"a-b.c d":         `input["a-b"]["c d"]`,
		"resource.name":   "input.resource.name",
		"kwargs.amount.x": "input.kwargs.amount.x",
	} {
		p, err := request.ParsePath(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := field(p, modeOrdered); got != want {
			t.Errorf("field(%q) = %s, want %s", in, got, want)
		}
	}
	p, _ := request.ParsePath("resource.name")
	if got := field(p, modeResource); got != "r.name" {
		t.Errorf("in a per-resource evaluation resource.name is %s", got)
	}
}
