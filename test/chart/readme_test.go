package chart

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/testenv"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite charts/toolgate/README.md from values.yaml")

// TestChartREADME keeps charts/toolgate/README.md in step with the
// `# --` comments of values.yaml (helm-docs' convention): it fails when
// values.yaml changes without the README. Regenerate with
//
//	go test ./test/chart -run TestChartREADME -update-readme
func TestChartREADME(t *testing.T) {
	t.Parallel()
	values, err := os.ReadFile(filepath.Join(testenv.ChartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := chartREADME(values)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(testenv.ChartDir(), "README.md")
	if *updateREADME {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: generate it with go test ./test/chart -run TestChartREADME -update-readme", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("charts/toolgate/README.md is not what values.yaml generates: run go test ./test/chart -run TestChartREADME -update-readme\n%s", firstDifference(string(got), string(want)))
	}
}

// TestChartREADMEGenerator is the control for the test above: a changed
// comment or default changes the README, and a value without a `# --`
// comment is an error rather than a silent gap.
func TestChartREADMEGenerator(t *testing.T) {
	t.Parallel()
	base := "# -- Replicas.\nreplicaCount: 2\nimage:\n  # -- Tag | empty: appVersion.\n  tag: \"\"\n  # -- Limits.\n  resources:\n    limits: {cpu: \"1\"}\n"
	out, err := chartREADME([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| `replicaCount` | int | `2` | Replicas. |", "| `image.tag` | string | `\"\"` | Tag \\| empty: appVersion. |", "| `image.resources` | object | `{\"limits\":{\"cpu\":\"1\"}}` | Limits. |"} {
		if !strings.Contains(string(out), row) {
			t.Errorf("README lacks %s:\n%s", row, out)
		}
	}
	changed, err := chartREADME([]byte(strings.Replace(base, "replicaCount: 2", "replicaCount: 3", 1)))
	if err != nil || bytes.Equal(changed, out) {
		t.Errorf("a changed default left the README unchanged (%v)", err)
	}
	if _, err := chartREADME([]byte("image:\n  tag: \"\"\n")); err == nil || !strings.Contains(err.Error(), "image.tag") {
		t.Errorf("an undocumented value: %v, want an error naming image.tag", err)
	}
}

// chartREADME renders the README: a short header and one table row per
// documented value. A mapping whose key carries the comment (resources, a
// selector) is one row with its whole default; one without is walked.
func chartREADME(values []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(`# toolgate chart

<!-- Generated from values.yaml by go test ./test/chart -run TestChartREADME -update-readme. Do not edit. -->

Kubernetes-native governance for AI agents' tool calls: the Policy,
FrozenAgent, Agent and MCPUpstream CRDs, the operator that publishes them,
admission webhooks and sidecar injection. Needs Kubernetes 1.30 or later.

    helm install toolgate charts/toolgate -n toolgate-system --create-namespace --wait

Until the manager is ready, the Policy webhook (failurePolicy Fail by
default) refuses Policy writes: install with --wait. See docs/install.md in
the repository for the choices and the rest of the install.

## Values

| Key | Type | Default | Description |
|-----|------|---------|-------------|
`)
	var walk func(prefix string, m *yaml.Node) error
	walk = func(prefix string, m *yaml.Node) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			key, value := m.Content[i], m.Content[i+1]
			path := prefix + key.Value
			desc := docComment(key.HeadComment)
			if value.Kind == yaml.MappingNode && len(value.Content) > 0 && (desc == "" || childrenDocumented(value)) {
				if desc != "" {
					if err := row(&b, path, value, desc); err != nil {
						return err
					}
				}
				if err := walk(path+".", value); err != nil {
					return err
				}
				continue
			}
			if desc == "" {
				return fmt.Errorf("values.yaml %s has no `# --` comment", path)
			}
			if err := row(&b, path, value, desc); err != nil {
				return err
			}
		}
		return nil
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("values.yaml is empty")
	}
	if err := walk("", doc.Content[0]); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func childrenDocumented(m *yaml.Node) bool {
	for i := 0; i < len(m.Content); i += 2 {
		if docComment(m.Content[i].HeadComment) != "" {
			return true
		}
	}
	return false
}

// docComment returns the `# --` comment of a key as one line: the text
// from its `# --` marker on (a file header above it is not part of it).
func docComment(head string) string {
	lines := strings.Split(head, "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "# --"); ok {
			words := []string{strings.TrimSpace(rest)}
			for _, more := range lines[i+1:] {
				words = append(words, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(more), "#")))
			}
			return strings.Join(strings.Fields(strings.Join(words, " ")), " ")
		}
	}
	return ""
}

func row(b *strings.Builder, path string, value *yaml.Node, desc string) error {
	var v any
	if err := value.Decode(&v); err != nil {
		return fmt.Errorf("values.yaml %s: %w", path, err)
	}
	def, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("values.yaml %s: %w", path, err)
	}
	typ := "string"
	switch v.(type) {
	case int, int64, uint64:
		typ = "int"
	case float64:
		typ = "float"
	case bool:
		typ = "bool"
	case map[string]any:
		typ = "object"
	case []any:
		typ = "list"
	case nil:
		typ = "null"
	}
	// Pipes would end the cell and <...> would render as an HTML tag.
	cell := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace
	fmt.Fprintf(b, "| `%s` | %s | `%s` | %s |\n", path, typ, cell(string(def)), cell(desc))
	return nil
}

// firstDifference shows where two texts first part, for a readable failure.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  README:    %s\n  generated: %s", i+1, gl, wl)
		}
	}
	return ""
}
