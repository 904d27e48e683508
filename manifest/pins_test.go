package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// TestBundleCarriesPinsWithoutRegistering: an MCPUpstream manifest with
// pins, and no Agent, gives a bundle with its pins (strict written out,
// schema version 6) and no Identity: the namespace's agents stay
// unregistered. Malformed pins are refused with the field and why.
func TestBundleCarriesPinsWithoutRegistering(t *testing.T) {
	digest := strings.Repeat("9f", 32)
	dir := t.TempDir()
	write := func(name, doc string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("policy.yaml", fmt.Sprintf(policyYAML, "p"))
	write("upstream.yaml", "apiVersion: toolgate.dev/v1alpha1\nkind: MCPUpstream\nmetadata: {name: files, namespace: agents}\n"+
		"spec: {url: 'https://mcp.example/files', pinnedTools: {read_file: "+digest+"}}\n")
	_, b, err := LoadBundle([]string{dir}, nil, "", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Identity != nil || b.SchemaVersion != engine.SchemaVersionResults {
		t.Errorf("identity %+v, schema %d: want none, %d", b.Identity, b.SchemaVersion, engine.SchemaVersionResults)
	}
	if p := b.PinsFor("files"); p == nil || p.Pinning != "strict" || p.Tools["read_file"] != digest {
		t.Errorf("pins %+v", b.Pins)
	}
	doc, _, err := engine.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := engine.Decode(doc)
	if err != nil || back.PinsFor("files") == nil || back.PinsFor("files").Tools["read_file"] != digest {
		t.Errorf("the bundle document does not carry the pins back: %v, %+v", err, back.Pins)
	}

	for spec, wants := range map[string][]string{
		"pinning: lax, pinnedTools: {read_file: " + strings.ToUpper(digest) + "}": {"spec.pinning", `"lax"`, "spec.pinnedTools.read_file", "should match '^[0-9a-f]{64}$'"},
		"pinnedTools: {'read file': " + digest + "}":                              {"spec.pinnedTools", "a tool name must be 1-128"},
		"pinning: warn": {"pinning needs pinnedTools"},
	} {
		write("upstream.yaml", "apiVersion: toolgate.dev/v1alpha1\nkind: MCPUpstream\nmetadata: {name: files, namespace: agents}\n"+
			"spec: {url: 'https://mcp.example/files', "+spec+"}\n")
		_, _, err = LoadBundle([]string{dir}, nil, "", time.Time{})
		for _, want := range wants {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want it to say %q", spec, err, want)
			}
		}
	}
}
