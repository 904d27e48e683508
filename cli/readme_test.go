package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The README and the docs/ pages are the reference users copy from: their
// policies must be what the API server and the webhook accept, and the
// explain trace (docs/policies.md) what the engine prints.

var yamlBlock = regexp.MustCompile("(?s)```ya?ml\n(.*?)```")

// readme is the user documentation: README.md, then every docs/ page.
func readme(t *testing.T) string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, path := range append([]string{filepath.Join("..", "README.md")}, pages...) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(data)
		text.WriteString("\n")
	}
	return text.String()
}

// asPolicy turns a docs block into a manifest: a whole Policy or
// FrozenAgent as it is; a list of rules, a conditions block or a list of
// conditions inside a minimal Policy. Other blocks (chart values, Pod
// snippets) are not policies: ok is false.
func asPolicy(block string) (doc string, ok bool) {
	indent := func(s, by string) string {
		return by + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+by)
	}
	head := "apiVersion: toolgate.dev/v1alpha1\nkind: Policy\nmetadata: {name: readme}\nspec:\n"
	switch {
	case strings.Contains(block, "kind: Policy") || strings.Contains(block, "kind: FrozenAgent"):
		return block, true
	case strings.HasPrefix(block, "- id:"):
		if strings.Contains(block, "priority:") {
			head += "  evaluation: tiered\n"
		}
		return head + "  rules:\n" + indent(block, "  "), true
	case strings.HasPrefix(block, "conditions:"):
		return head + "  rules:\n  - id: r\n    effect: deny\n" + indent(block, "    "), true
	case strings.HasPrefix(block, "- {field:"):
		return head + "  rules:\n  - id: r\n    effect: deny\n    conditions:\n" + indent(block, "    "), true
	}
	return "", false
}

func TestReadmePoliciesValidate(t *testing.T) {
	checked := 0
	for i, m := range yamlBlock.FindAllStringSubmatch(readme(t), -1) {
		doc, ok := asPolicy(m[1])
		if !ok {
			continue
		}
		checked++
		if o := run(t, doc, "validate", "-f", "-"); o.code != 0 {
			t.Errorf("README yaml block %d does not validate (exit %d):\n%s\n%s%s", i, o.code, doc, o.stdout, o.stderr)
		}
	}
	// The reference, the tiered example, its rule list, the condition
	// groups, the condition examples and the FrozenAgent at least.
	if checked < 6 {
		t.Fatalf("only %d README blocks were recognised as policies: the extraction no longer matches the README", checked)
	}
}

// TestReadmeExplainTrace: the trace and verdicts the README shows for the
// bash-exceptions example are what toolgate eval --explain prints for a
// call by an agent that is not the build agent.
func TestReadmeExplainTrace(t *testing.T) {
	text := readme(t)
	var policy string
	for _, m := range yamlBlock.FindAllStringSubmatch(text, -1) {
		if strings.Contains(m[1], "name: bash-exceptions") {
			policy = m[1]
		}
	}
	start := strings.Index(text, "```json\n\"trace\":[{\"policyId\":\"bash-exceptions\"")
	if policy == "" || start < 0 {
		t.Fatal("the README no longer holds the bash-exceptions example and its trace")
	}
	snippet := text[start+len("```json\n"):]
	snippet = snippet[:strings.Index(snippet, "```")]
	var want map[string]json.RawMessage
	if err := json.Unmarshal([]byte("{"+snippet+"}"), &want); err != nil {
		t.Fatalf("the README's trace is not JSON: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	o := run(t, `{"tool_name":"Bash","agent_id":"other-agent"}`, "eval", "-f", dir, "--request", "-", "--explain")
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(o.stdout), &got); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"trace", "verdicts"} {
		var g, w any
		if err := json.Unmarshal(got[key], &g); err != nil {
			t.Fatalf("%s: %v in %s", key, err, o.stdout)
		}
		if err := json.Unmarshal(want[key], &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n README %s\n eval   %s", key, want[key], got[key])
		}
	}
}
