package pin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// TestCanonical: keys sorted at every depth, no whitespace, absent and
// null members left out, numbers as encoding/json writes a float64, and
// only the four covered members.
func TestCanonical(t *testing.T) {
	t.Parallel()
	tool := `{ "title": "Read", "outputSchema": {"type":"object"}, "_meta": {"x": 1},
	  "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 1.0e3}}, "required": ["path"]},
	  "description": "Reads <a> & file", "annotations": null, "name": "read_file" }`
	name, doc, err := Canonical([]byte(tool))
	want := `{"description":"Reads \u003ca\u003e \u0026 file","inputSchema":{"properties":{"path":{"maxLength":1000,"type":"string"}},"required":["path"],"type":"object"},"name":"read_file"}`
	if err != nil || name != "read_file" || string(doc) != want {
		t.Fatalf("Canonical = %q, %s, %v; want read_file, %s", name, doc, err, want)
	}
	_, digest, err := Digest([]byte(tool))
	sum := sha256.Sum256([]byte(want))
	if err != nil || digest != hex.EncodeToString(sum[:]) || !ValidDigest(digest) {
		t.Fatalf("Digest = %q, %v", digest, err)
	}
	// The same definition written otherwise has the same digest; any
	// change to a covered member changes it.
	same := `{"name":"read_file","description":"Reads <a> & file","inputSchema":{"required":["path"],"type":"object","properties":{"path":{"maxLength":1000,"type":"string"}}}}`
	if _, d, _ := Digest([]byte(same)); d != digest {
		t.Errorf("an equal definition written otherwise has digest %s, want %s", d, digest)
	}
	changed := strings.Replace(same, "Reads", "Reads and uploads", 1)
	if _, d, _ := Digest([]byte(changed)); d == digest {
		t.Error("a changed description kept the digest")
	}
	annotated := strings.Replace(same, `"name"`, `"annotations":{"destructiveHint":true},"name"`, 1)
	if _, d, _ := Digest([]byte(annotated)); d == digest {
		t.Error("added annotations kept the digest")
	}
}

func TestCanonicalMalformed(t *testing.T) {
	t.Parallel()
	for tool, want := range map[string]string{
		`[]`:                            "must be a JSON object",
		`null`:                          "not null",
		`{"description":"x"}`:           "non-empty string name",
		`{"name":""}`:                   "non-empty string name",
		`{"name":5}`:                    "non-empty string name",
		`{"name":"a","inputSchema":{]}`: "must be a JSON object",
		`{"name":"a"`:                   "must be a JSON object",
	} {
		if _, _, err := Digest([]byte(tool)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Digest(%s) = %v, want an error saying %q", tool, err, want)
		}
	}
}

func TestSetCheck(t *testing.T) {
	t.Parallel()
	good := strings.Repeat("ab", 32)
	if err := (&Set{Mode: Strict, Tools: map[string]string{"read_file": good, "a.b-c": good}}).Check(); err != nil {
		t.Fatalf("a good set: %v", err)
	}
	many := map[string]string{}
	for i := range MaxTools + 1 {
		many[fmt.Sprintf("t%d", i)] = good
	}
	for name, tc := range map[string]struct {
		set  Set
		want []string
	}{
		"mode":          {Set{Mode: "loose", Tools: map[string]string{"a": good}}, []string{`pinning "loose" is neither strict nor warn`}},
		"empty":         {Set{Mode: Warn}, []string{"no tool is pinned"}},
		"too many":      {Set{Mode: Warn, Tools: many}, []string{"more than 512"}},
		"upper hex":     {Set{Mode: Strict, Tools: map[string]string{"a": strings.ToUpper(good)}}, []string{`pinned tool "a": digest`, "64 lower-case hex"}},
		"short":         {Set{Mode: Strict, Tools: map[string]string{"a": "abc"}}, []string{`digest "abc"`}},
		"prefixed":      {Set{Mode: Strict, Tools: map[string]string{"a": "sha256:" + good}}, []string{"not 64 lower-case hex"}},
		"name chars":    {Set{Mode: Strict, Tools: map[string]string{"a/b": good}}, []string{`pinned tool "a/b": a tool name is 1-128`}},
		"name too long": {Set{Mode: Strict, Tools: map[string]string{strings.Repeat("n", 129): good}}, []string{"a tool name is 1-128"}},
	} {
		err := tc.set.Check()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Check() = %v, want it to say %q", name, err, w)
			}
		}
	}
}

func TestDriftOf(t *testing.T) {
	t.Parallel()
	d := strings.Repeat("0", 64)
	strict := &Set{Mode: Strict, Tools: map[string]string{"a": d}}
	warn := &Set{Mode: Warn, Tools: strict.Tools}
	for _, tc := range []struct {
		name, digest string
		want         Drift
	}{{"a", d, None}, {"a", strings.Repeat("1", 64), Changed}, {"a", "", Changed}, {"b", d, Unpinned}} {
		got := strict.DriftOf(tc.name, tc.digest)
		if got != tc.want {
			t.Errorf("DriftOf(%s, %s) = %q, want %q", tc.name, tc.digest, got, tc.want)
		}
		if strict.Hides(got) != (got != None) || warn.Hides(got) != (got == Changed) {
			t.Errorf("%s: strict hides %v, warn hides %v", got, strict.Hides(got), warn.Hides(got))
		}
	}
}

func TestParseFile(t *testing.T) {
	t.Parallel()
	d := strings.Repeat("c", 64)
	for doc, want := range map[string]string{
		"pinnedTools:\n  read_file: " + d + "\n":                         "strict read_file",
		`{"pinning": "warn", "pinnedTools": {"read_file": "` + d + `"}}`: "warn read_file",
		"apiVersion: toolgate.dev/v1alpha1\nkind: MCPUpstream\nmetadata: {name: files}\nspec:\n  url: https://x/\n  pinning: warn\n  pinnedTools: {pay: " + d + "}\n": "warn pay files",
	} {
		set, named, err := ParseFile([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		got := set.Mode
		for name := range set.Tools {
			got += " " + name
		}
		if named != "" {
			got += " " + named
		}
		if got != want {
			t.Errorf("%s: %q, want %q", doc, got, want)
		}
	}
	for doc, want := range map[string]string{
		"":                        "no pinnedTools",
		"url: x\n":                "no pinnedTools",
		"pinnedTools: [a]\n":      "not YAML or JSON",
		"pinnedTools: {}\n":       "no tool is pinned",
		"pinnedTools: {a: abc}\n": `pinned tool "a": digest "abc" is not 64 lower-case hex digits`,
		"pinning: loose\npinnedTools: {a: " + d + "}\n": `pinning "loose" is neither strict nor warn`,
		"kind: Policy\n": `kind "Policy": want an MCPUpstream`,
		"kind: MCPUpstream\nmetadata: {name: f}\n": "an MCPUpstream's pins go in spec.pinnedTools",
		"kind: MCPUpstream\nspec: {url: x}\n":      "no tool is pinned",
		"\t{":                                      "not YAML or JSON",
	} {
		if _, _, err := ParseFile([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFile(%q) = %v, want an error saying %q", doc, err, want)
		}
	}
	if _, _, err := ParseFile(make([]byte, maxFileBytes+1)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a huge file: %v", err)
	}
}
