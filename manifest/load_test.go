package manifest

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestLoadMultiDocumentYAML(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"all.yaml": `---
# only a comment: an empty document, still counted
---
` + fmt.Sprintf(policyYAML, "p1") + `
--- # a separator may carry a comment
apiVersion: toolgate.dev/v1alpha1
kind: FrozenAgent
metadata: {name: f1, namespace: team-a}
spec:
  agentId: Agent-7
  expiresAt: 2030-01-01T00:00:00Z
---
`})
	s, err := Load([]string{filepath.Join(dir, "all.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Policies) != 1 || len(s.FrozenAgents) != 1 {
		t.Fatalf("got %d policies, %d frozen agents; want 1, 1", len(s.Policies), len(s.FrozenAgents))
	}
	p := s.Policies[0]
	if p.Object.Name != "p1" || p.Source.Doc != 2 || p.Source.Line != 4 || p.Source.Item != -1 {
		t.Errorf("policy %q from %+v; want p1 from doc 2 line 4", p.Object.Name, p.Source)
	}
	// The CRD defaults priority; defaultEffect it leaves to the bundle
	// builder (allow or deny by spec.evaluation).
	if p.Object.Spec.DefaultEffect != "" || p.Object.Spec.Priority != 0 {
		t.Errorf("CRD defaults: %+v", p.Object.Spec)
	}
	if p.Object.Kind != "Policy" || p.Object.APIVersion != "toolgate.dev/v1alpha1" {
		t.Errorf("type meta lost: %+v", p.Object.TypeMeta)
	}
	f := s.FrozenAgents[0]
	if f.Source.Doc != 3 || f.Object.Spec.AgentID != "Agent-7" || f.Object.Namespace != "team-a" ||
		f.Object.Spec.ExpiresAt == nil || f.Object.Spec.ExpiresAt.Year() != 2030 {
		t.Errorf("frozen agent %+v from %+v", f.Object.Spec, f.Source)
	}
}

func TestLoadKeepsExplicitDefaultEffect(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": strings.Replace(fmt.Sprintf(policyYAML, "p"),
		"spec:\n", "spec:\n  defaultEffect: deny\n  priority: -10\n", 1)})
	s, err := Load([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Policies[0].Object.Spec; got.DefaultEffect != v1alpha1.EffectDeny || got.Priority != -10 {
		t.Errorf("spec = %+v", got)
	}
}

func TestLoadDirectoryRecursively(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"b.yaml":           fmt.Sprintf(policyYAML, "b"),
		"a/nested/c.yml":   fmt.Sprintf(policyYAML, "c"),
		"a/d.json":         `{"apiVersion":"toolgate.dev/v1alpha1","kind":"Policy","metadata":{"name":"d"},"spec":{"rules":[{"id":"r","effect":"allow"}]}}`,
		"a/E.YAML":         fmt.Sprintf(policyYAML, "e"),
		"a/notes.txt":      "not a manifest: ignored",
		"a/nested/x.yaml~": "editor backup: ignored",
		"empty/.keep":      "",
	})
	s, err := Load([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range s.Policies {
		names = append(names, p.Object.Name)
	}
	// Lexical walk order: a/E.YAML, a/d.json, a/nested/c.yml, b.yaml.
	if want := []string{"e", "d", "c", "b"}; !slices.Equal(names, want) {
		t.Errorf("loaded %v, want %v", names, want)
	}
}

func TestLoadEmptyDirectoryHasNoObjects(t *testing.T) {
	s, err := Load([]string{t.TempDir()}, nil)
	if err != nil || s.Len() != 0 {
		t.Fatalf("Load(empty dir) = %d objects, %v; want 0, nil", s.Len(), err)
	}
}

func TestLoadExplicitFileOfAnyExtension(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"policy.txt": fmt.Sprintf(policyYAML, "p")})
	s, err := Load([]string{filepath.Join(dir, "policy.txt")}, nil)
	if err != nil || len(s.Policies) != 1 {
		t.Fatalf("got %d policies, %v", len(s.Policies), err)
	}
}

func TestLoadStdin(t *testing.T) {
	s, err := Load([]string{Stdin}, strings.NewReader(fmt.Sprintf(policyYAML, "p")))
	if err != nil || len(s.Policies) != 1 || s.Policies[0].Source.String() != "<stdin>:doc 1" {
		t.Fatalf("got %+v, %v", s.Policies, err)
	}
	_, err = Load([]string{Stdin, Stdin}, strings.NewReader(""))
	if got := errorLines(t, err, ""); !slices.Equal(got, []string{"<stdin>: standard input given more than once"}) {
		t.Errorf("stdin twice: %q", got)
	}
}

func TestLoadJSONStream(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"s.json": `
{"apiVersion":"toolgate.dev/v1alpha1","kind":"Policy","metadata":{"name":"a"},"spec":{"rules":[{"id":"r","effect":"allow"}]}}
{"apiVersion":"toolgate.dev/v1alpha1",
	"kind":"FrozenAgent","metadata":{"name":"f"},"spec":{"agentId":"x"}}`})
	s, err := Load([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Policies) != 1 || len(s.FrozenAgents) != 1 {
		t.Fatalf("got %d, %d", len(s.Policies), len(s.FrozenAgents))
	}
	if src := s.FrozenAgents[0].Source; src.Doc != 2 || src.Line != 3 {
		t.Errorf("frozen agent source %+v, want doc 2 line 3", src)
	}
}

func TestLoadList(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"list.yaml": `apiVersion: v1
kind: List
items:
- apiVersion: toolgate.dev/v1alpha1
  kind: Policy
  metadata: {name: a, namespace: ns, generation: 4}
  spec:
    rules: [{id: r, effect: allow}]
- apiVersion: toolgate.dev/v1alpha1
  kind: FrozenAgent
  metadata: {name: f, namespace: ns}
  spec: {agentId: x}
`, "plist.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: PolicyList
items:
- apiVersion: toolgate.dev/v1alpha1
  kind: Policy
  metadata: {name: b}
  spec:
    rules: [{id: r, effect: allow}]
`})
	s, err := Load([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Policies) != 2 || len(s.FrozenAgents) != 1 {
		t.Fatalf("got %d policies, %d frozen", len(s.Policies), len(s.FrozenAgents))
	}
	if p := s.Policies[0]; p.Object.Name != "a" || p.Object.Generation != 4 || p.Source.Item != 0 {
		t.Errorf("first policy %+v from %+v", p.Object.ObjectMeta, p.Source)
	}
	if f := s.FrozenAgents[0]; f.Source.Item != 1 {
		t.Errorf("frozen agent source %+v, want item 1", f.Source)
	}
}

func TestLoadKeepsGoodDocumentsAroundABadOne(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"m.yaml": fmt.Sprintf(policyYAML, "a") + "---\nkind: Nope\napiVersion: v1\n---\n" + fmt.Sprintf(policyYAML, "b")})
	s, err := Load([]string{dir}, nil)
	if len(s.Policies) != 2 {
		t.Errorf("got %d policies, want the 2 good ones", len(s.Policies))
	}
	want := []string{`m.yaml:doc 2: Nope: kind: unknown kind "Nope" (apiVersion "v1"): toolgate reads Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException of toolgate.dev/v1alpha1`}
	if got := errorLines(t, err, dir); !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNamespaces(t *testing.T) {
	s := &Set{
		Policies: []Policy{
			{Object: v1alpha1.Policy{}},
			{Object: v1alpha1.Policy{}},
		},
		FrozenAgents: []FrozenAgent{{Object: v1alpha1.FrozenAgent{}}},
	}
	s.Policies[0].Object.Name, s.Policies[0].Object.Namespace = "a", "team-b"
	s.Policies[1].Object.Name = "b"
	s.FrozenAgents[0].Object.Name, s.FrozenAgents[0].Object.Namespace = "f", "team-a"
	if got := s.Namespaces(); !slices.Equal(got, []string{"team-a", "team-b"}) {
		t.Errorf("Namespaces() = %v", got)
	}
	in := s.InNamespace("team-a")
	if len(in.Policies) != 1 || in.Policies[0].Object.Name != "b" || in.Policies[0].Object.Namespace != "team-a" ||
		len(in.FrozenAgents) != 1 {
		t.Errorf("InNamespace(team-a) = %+v", in)
	}
	if s.Policies[1].Object.Namespace != "" {
		t.Error("InNamespace changed the original set")
	}
	if all := s.InNamespace(""); all.Len() != 3 {
		t.Errorf("InNamespace(\"\") kept %d objects, want 3", all.Len())
	}
}

func TestDuplicatesAfterNamespaceSelection(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"a.yaml": fmt.Sprintf(policyYAML, "p"),
		"b.yaml": strings.Replace(fmt.Sprintf(policyYAML, "p"), "name: p", "name: p\n  namespace: team-a", 1),
	})
	s, err := Load([]string{dir}, nil)
	if err != nil {
		t.Fatalf("a namespace-less object and a namespaced one are not duplicates as written: %v", err)
	}
	got := errorLines(t, s.InNamespace("team-a").Duplicates().orNil(), dir)
	want := []string{`b.yaml:doc 1: Policy/p: metadata.name: duplicate Policy "p" in namespace "team-a" (first defined at a.yaml:doc 1)`}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLoadKeepsDocumentBeforeABadSeparator(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"m.yaml": fmt.Sprintf(policyYAML, "a") + "--- !!map\n" + fmt.Sprintf(policyYAML, "b")})
	s, err := Load([]string{dir}, nil)
	if err == nil || len(s.Policies) != 1 || s.Policies[0].Object.Name != "a" {
		t.Fatalf("got %d policies, %v; want policy a and an error", len(s.Policies), err)
	}
}

func TestLoadSkipsNonManifestFilesOnlyInDirectories(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"p.yaml":                fmt.Sprintf(policyYAML, "p"),
		"requests/ls.json":      `{"tool_name": "Bash", "input": {"command": "ls"}}`,
		"requests/empty.yaml":   "# nothing here\n",
		"forgot-kind/p.yaml":    "metadata: {name: q}\nspec: {rules: [{id: a, effect: allow}]}\n",
		"requests/scalars.yaml": "- not\n- an object\n",
	})
	s, err := Load([]string{dir}, nil)
	want := []string{
		"forgot-kind/p.yaml:doc 1: kind: missing: every document needs apiVersion: toolgate.dev/v1alpha1 and kind: one of Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException",
		"requests/scalars.yaml:doc 1: must be an object with apiVersion, kind, metadata and spec",
	}
	if got := errorLines(t, err, dir); !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(s.Policies) != 1 || !slices.Equal(s.Skipped, []string{filepath.Join(dir, "requests", "ls.json")}) {
		t.Errorf("policies %d, skipped %q", len(s.Policies), s.Skipped)
	}

	named := filepath.Join(dir, "requests", "ls.json")
	_, err = Load([]string{named}, nil)
	want = []string{named + ":doc 1: kind: missing: every document needs apiVersion: toolgate.dev/v1alpha1 and kind: one of Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException"}
	if got := errorLines(t, err, ""); !slices.Equal(got, want) {
		t.Errorf("a file named explicitly must not be skipped: %q", got)
	}
}

func TestLoadYAMLFlowStyleAndCRLF(t *testing.T) {
	flow := "{apiVersion: toolgate.dev/v1alpha1, kind: Policy, metadata: {name: flow}, spec: {rules: [{id: r, effect: allow}]}}\n---\n" +
		fmt.Sprintf(policyYAML, "after-flow")
	crlf := strings.ReplaceAll(fmt.Sprintf(policyYAML, "crlf-a")+"---\n"+fmt.Sprintf(policyYAML, "crlf-b"), "\n", "\r\n")
	dir := testenv.WriteTree(t, map[string]string{"flow.yaml": flow, "crlf.yaml": crlf})
	s, err := Load([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range s.Policies {
		names = append(names, fmt.Sprintf("%s@%d", p.Object.Name, p.Source.Doc))
	}
	if want := []string{"crlf-a@1", "crlf-b@2", "flow@1", "after-flow@2"}; !slices.Equal(names, want) {
		t.Errorf("loaded %v, want %v", names, want)
	}
}

func TestLoadSkipsKustomizationFilesInDirectories(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"p.yaml":             fmt.Sprintf(policyYAML, "p"),
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [p.yaml]\n",
	})
	s, err := Load([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Policies) != 1 || !slices.Equal(s.Skipped, []string{filepath.Join(dir, "kustomization.yaml")}) {
		t.Errorf("policies %d, skipped %q", len(s.Policies), s.Skipped)
	}
	// Named explicitly, it is what it is: an unknown kind.
	if _, err := Load([]string{filepath.Join(dir, "kustomization.yaml")}, nil); err == nil || !strings.Contains(err.Error(), "Kustomization") {
		t.Errorf("an explicit kustomization.yaml: %v", err)
	}
}

// TestLoadKeepsOnlyWhatTheAPIServerStores: an object the schema rejects is
// reported and counted, not loaded.
func TestLoadKeepsOnlyWhatTheAPIServerStores(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"m.yaml": fmt.Sprintf(policyYAML, "good") + "---\n" +
		fmt.Sprintf(policyYAML, "Bad_Name") + "---\n" +
		"apiVersion: toolgate.dev/v1alpha1\nkind: FrozenAgent\nmetadata: {name: f}\nspec: {reason: no agent}\n"})
	s, err := Load([]string{dir}, nil)
	if err == nil {
		t.Fatal("no error for a bad name and a missing agentId")
	}
	if len(s.Policies) != 1 || s.Policies[0].Object.Name != "good" || len(s.FrozenAgents) != 0 {
		t.Errorf("loaded %d policies, %d frozen agents; want only policy good", len(s.Policies), len(s.FrozenAgents))
	}
	if want := map[string]int{"Policy": 1, "FrozenAgent": 1}; !maps.Equal(s.Rejected, want) {
		t.Errorf("Rejected %v, want %v", s.Rejected, want)
	}
}
