package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLoadAgentsAndUpstreams: a GitOps directory holding Agents and
// MCPUpstreams beside Policies loads (they were "unknown kind" before),
// each checked with its CRD's schema, and its bundle registers the agents
// as the operator's would (no environment: labels are not in manifests).
func TestLoadAgentsAndUpstreams(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("policy.yaml", fmt.Sprintf(policyYAML, "p"))
	write("agents.yaml", `apiVersion: toolgate.dev/v1alpha1
kind: Agent
metadata: {name: billing, namespace: agents}
spec: {serviceAccountName: billing-bot, roles: [reader], upstreams: [github]}
---
apiVersion: toolgate.dev/v1alpha1
kind: MCPUpstream
metadata: {name: github, namespace: agents}
spec: {url: "https://mcp.example/github", credentialSecretRef: {name: gh}}
`)
	set, b, err := LoadBundle([]string{dir}, nil, "", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Agents) != 1 || len(set.Upstreams) != 1 || set.Len() != 3 {
		t.Fatalf("loaded %d agents, %d upstreams, %d objects", len(set.Agents), len(set.Upstreams), set.Len())
	}
	if b.Identity == nil || b.SchemaVersion != 3 {
		t.Fatalf("bundle identity %+v, schema %d", b.Identity, b.SchemaVersion)
	}
	if a, ok := b.Identity.AgentFor("billing-bot"); !ok || a.ID != "billing" || !slices.Equal(a.Roles, []string{"reader"}) {
		t.Errorf("billing-bot's agent %+v %v", a, ok)
	}
	if u, ok := b.Identity.UpstreamURL("github"); !ok || u != "https://mcp.example/github" {
		t.Errorf("github at %q %v", u, ok)
	}

	write("bad.yaml", `apiVersion: toolgate.dev/v1alpha1
kind: MCPUpstream
metadata: {name: exfil, namespace: agents}
spec: {url: "https://user:pw@evil.example/"}
---
apiVersion: toolgate.dev/v1alpha1
kind: Agent
metadata: {name: billing, namespace: agents}
spec: {serviceAccountName: other}
`)
	_, err = Load([]string{dir}, nil)
	got := strings.Join(errorLines(t, err, dir), "\n")
	for _, want := range []string{"MCPUpstream/exfil", "must not hold credentials", `duplicate Agent "billing"`} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
}
