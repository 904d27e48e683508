package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestTieredPolicyReachesSidecar (issue 9): a tiered Policy created with the
// typed client, as kubectl would, goes through the API server's schema and
// the manager's webhook, is published by the manager and decides in a
// --configmap sidecar as the gateway model says. A namespace whose policies
// use none of the new fields keeps a version 1 bundle, so sidecars not yet
// upgraded keep serving it during a rolling upgrade.
func TestTieredPolicyReachesSidecar(t *testing.T) {
	const ns = "gateway"
	dir := t.TempDir()
	bin, cluster := startCluster(t, dir)
	c := cluster.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.StartProcess("manager", bin, cluster.ManagerArgs()...); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeLoopbackAddr(t)
	if _, err := cluster.StartProcess("sidecar", bin, "sidecar", "--configmap", ns+"/toolgate-bundle",
		"--kubeconfig", cluster.Kubeconfig, "--listen", addr, "--decision-log", "none"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for _, name := range []string{"manager", "sidecar"} {
				if b, err := os.ReadFile(dir + "/" + name + ".log"); err == nil {
					t.Logf("%s log (tail):\n%s", name, tail(string(b), 3000))
				}
			}
		}
	}()
	call := func(agent, tool string) map[string]any {
		return map[string]any{"tool_name": tool, "agent_id": agent, "input": map[string]any{"command": "make build"}}
	}

	// An ordered policy, first by priority, so its default (allow) is the
	// namespace's.
	plain := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
		Spec: v1alpha1.PolicySpec{Priority: 10, Rules: []v1alpha1.Rule{{ID: "no-curl", Effect: v1alpha1.RuleDeny,
			Conditions: []v1alpha1.Condition{{Field: "tool_name", Operator: "eq", Value: &apiextensionsv1.JSON{Raw: []byte(`"Curl"`)}}}}}}}
	if err := c.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	d := answersEventually(t, addr, call("build-agent", "Curl"), "deny no-curl", is("deny", "", "no-curl"))
	if d.Effect != "deny" {
		t.Errorf("effect %q, want deny", d.Effect)
	}
	if v := publishedSchemaVersion(t, c, ns); v != 1 {
		t.Errorf("a namespace without issue 9's fields published schemaVersion %d, want 1", v)
	}

	tiered := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bash-gateway"},
		Spec: v1alpha1.PolicySpec{Evaluation: v1alpha1.EvaluationTiered, Rules: []v1alpha1.Rule{
			{ID: "no-bash", Description: "Bash is for the build agent only", Effect: v1alpha1.RuleDeny,
				Targets: &v1alpha1.Targets{Tools: []string{"Bash"}}},
			{ID: "build-agent-bash", Priority: 10, Effect: v1alpha1.RuleAllow,
				Subjects: &v1alpha1.Subjects{Agents: []string{"build-agent"}}, Targets: &v1alpha1.Targets{Tools: []string{"Bash"}}},
			{ID: "writes-reviewed", Description: "writes are reviewed", Effect: v1alpha1.RuleWarn,
				Targets: &v1alpha1.Targets{Tools: []string{"Write"}}},
		}}}
	if err := c.Create(ctx, tiered); err != nil {
		t.Fatal(err)
	}
	d = answersEventually(t, addr, call("other-agent", "Bash"), "deny no-bash", is("deny", "", "no-bash"))
	if d.Effect != "deny" || d.Reason != "Bash is for the build agent only" {
		t.Errorf("another agent's Bash: effect %q, reason %q", d.Effect, d.Reason)
	}
	// The exception sits a tier above the deny, so it decides; agent ids
	// compare as FrozenAgents do.
	for _, agent := range []string{"build-agent", "Build-Agent"} {
		d, err := evaluate(addr, call(agent, "Bash"))
		if err != nil || !is("allow", "", "build-agent-bash")(d) || d.Effect != "allow" {
			t.Errorf("%s's Bash: %v effect %q, err %v", agent, d, d.Effect, err)
		}
	}
	d, err := evaluate(addr, call("other-agent", "Write"))
	if err != nil || !is("allow", "", "writes-reviewed")(d) || d.Effect != "warn" || !slices.Equal(d.Warnings, []string{"writes are reviewed"}) {
		t.Errorf("Write: %v effect %q warnings %q, err %v", d, d.Effect, d.Warnings, err)
	}
	// No rule of either policy: the first policy's default, with no warnings.
	d, err = evaluate(addr, call("other-agent", "Read"))
	if err != nil || !is("allow", "", "")(d) || d.Effect != "allow" || d.Warnings != nil {
		t.Errorf("Read: %v effect %q warnings %q, err %v", d, d.Effect, d.Warnings, err)
	}
	if v := publishedSchemaVersion(t, c, ns); v != 2 {
		t.Errorf("with a tiered policy the bundle has schemaVersion %d, want 2", v)
	}

	// A multi-target call: each table is decided by the rules bound to it; a
	// table whose bound rules all fail is an implicit deny naming it.
	tables := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tables"},
		Spec: v1alpha1.PolicySpec{Evaluation: v1alpha1.EvaluationTiered, Rules: []v1alpha1.Rule{
			{ID: "analysts-read-orders", Effect: v1alpha1.RuleAllow, Subjects: &v1alpha1.Subjects{Roles: []string{"analyst"}},
				Targets: &v1alpha1.Targets{Resources: []v1alpha1.ResourceTarget{{Type: "table", Names: []string{"orders"}}}}},
			{ID: "hr-reads-salaries", Effect: v1alpha1.RuleAllow, Subjects: &v1alpha1.Subjects{Roles: []string{"hr"}},
				Targets: &v1alpha1.Targets{Resources: []v1alpha1.ResourceTarget{{Type: "table", Names: []string{"salaries"}}}}},
		}}}
	if err := c.Create(ctx, tables); err != nil {
		t.Fatal(err)
	}
	query := func(names ...string) map[string]any {
		var rs []any
		for _, n := range names {
			rs = append(rs, map[string]any{"type": "table", "name": n})
		}
		return map[string]any{"tool_name": "query", "agent_id": "report-bot", "roles": []any{"analyst"}, "resources": rs}
	}
	d = answersEventually(t, addr, query("orders", "salaries"), "IMPLICIT_DENY", is("deny", "IMPLICIT_DENY", ""))
	if d.MatchedResource == nil || d.MatchedResource.Type != "table" || d.MatchedResource.Name != "salaries" {
		t.Errorf("implicit deny: matchedResource %+v, want table/salaries", d.MatchedResource)
	}
	d, err = evaluate(addr, query("orders"))
	if err != nil || !is("allow", "", "analysts-read-orders")(d) || d.MatchedResource == nil || d.MatchedResource.Name != "orders" {
		t.Errorf("orders alone: %v matchedResource %+v, err %v", d, d.MatchedResource, err)
	}
	if err := c.Delete(ctx, tables); err != nil {
		t.Fatal(err)
	}

	// Back to ordered policies only: version 1 again.
	if err := c.Delete(ctx, tiered); err != nil {
		t.Fatal(err)
	}
	answersEventually(t, addr, call("other-agent", "Bash"), "allow (the tiered policy is gone)", is("allow", "", ""))
	if v := publishedSchemaVersion(t, c, ns); v != 1 {
		t.Errorf("after the tiered policy was deleted, schemaVersion %d, want 1", v)
	}
}

// publishedSchemaVersion reads the schemaVersion of the namespace's bundle
// ConfigMap as the sidecar serving it last saw it.
func publishedSchemaVersion(t *testing.T, c client.Client, ns string) int {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "toolgate-bundle"}, &cm); err != nil {
		t.Fatal(err)
	}
	raw, gz, err := bundle.FromConfigMap(&cm)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := bundle.ReadDocument(raw, gz)
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		SchemaVersion int `json:"schemaVersion"`
	}
	if err := json.Unmarshal(doc, &b); err != nil {
		t.Fatal(fmt.Errorf("bundle document: %w", err))
	}
	return b.SchemaVersion
}
