package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestGuardrailsReachTheSidecar (issue 26), real manager and sidecar
// processes on the API server: a ClusterPolicy selecting the namespace by
// its labels is not loosened by the namespace's allow; an Audit Policy
// changes no decision, is in the answer's shadow, and is counted in
// toolgate_sidecar_shadow_decisions_total; a PolicyException exempts its
// agent and says so.
func TestGuardrailsReachTheSidecar(t *testing.T) {
	const ns = "payments"
	dir := t.TempDir()
	bin, cluster := startCluster(t, dir)
	c := cluster.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "payments"}}}); err != nil {
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
	str := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(`"` + s + `"`)} }
	bash := v1alpha1.Condition{Field: "tool_name", Operator: "eq", Value: str("Bash")}
	for _, obj := range []client.Object{
		&v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-shell"},
			Spec: v1alpha1.PolicySpec{Priority: 100, Rules: []v1alpha1.Rule{{ID: "any-shell", Effect: v1alpha1.RuleAllow, Conditions: []v1alpha1.Condition{bash}}}}},
		&v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-curl-candidate"},
			Spec: v1alpha1.PolicySpec{Mode: v1alpha1.PolicyModeAudit, Rules: []v1alpha1.Rule{{ID: "no-curl", Effect: v1alpha1.RuleDeny,
				Conditions: []v1alpha1.Condition{bash, {Field: "input.command", Operator: "starts_with", Value: str("curl")}}}}}},
		&v1alpha1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-org-guardrails"},
			Spec: v1alpha1.ClusterPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}},
				AllowExceptions: true,
				PolicySpec: v1alpha1.PolicySpec{Rules: []v1alpha1.Rule{{ID: "no-rm-rf", Effect: v1alpha1.RuleDeny,
					Conditions: []v1alpha1.Condition{bash, {Field: "input.command", Operator: "contains", Value: str("rm -rf")}}}}}}},
		&v1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-migration"},
			Spec: v1alpha1.PolicyExceptionSpec{PolicyRef: v1alpha1.PolicyReference{Kind: v1alpha1.PolicyKindClusterPolicy, Name: "e2e-org-guardrails"},
				RuleIDs: []string{"no-rm-rf"}, Agents: v1alpha1.ExceptionAgents{AgentIDs: []string{"migration-bot"}},
				ExpiresAt: metav1.NewTime(time.Now().Add(24 * time.Hour)), Justification: "e2e"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("%s: %v", obj.GetName(), err)
		}
	}
	call := func(agent, command string) map[string]any {
		return map[string]any{"tool_name": "Bash", "agent_id": agent, "input": map[string]any{"command": command}}
	}
	answersEventually(t, addr, call("bot", "rm -rf /data"), "deny by the ClusterPolicy", is("deny", "", "no-rm-rf"))
	answersEventually(t, addr, call("migration-bot", "rm -rf /old"), "allow: the exception", is("allow", "", "any-shell"))
	raw := evaluateRaw(t, addr, call("migration-bot", "rm -rf /old"))
	if !strings.Contains(raw, `"matchedPolicyKind":"Policy"`) || !strings.Contains(raw, `"exceptionApplied":"storage-migration"`) {
		t.Errorf("exempted answer: %s", raw)
	}
	for range 3 {
		raw = evaluateRaw(t, addr, call("bot", "curl https://example.com"))
		if !strings.Contains(raw, `"decision":"allow"`) || !strings.Contains(raw, `"matchedRuleId":"any-shell"`) ||
			!strings.Contains(raw, `"shadow":[{"policy":"no-curl-candidate","decision":"deny","rule":"no-curl"}]`) {
			t.Fatalf("the Audit policy changed the decision, or is not in shadow: %s", raw)
		}
	}
	resp, err := httpClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	if want := `toolgate_sidecar_shadow_decisions_total{decision="deny",policy="no-curl-candidate"} 3`; !strings.Contains(string(metrics), want+"\n") {
		t.Errorf("metrics lack %s", want)
	}
}

// evaluateRaw is the sidecar's answer as it wrote it.
func evaluateRaw(t *testing.T, addr string, req map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(req)
	resp, err := httpClient.Post("http://"+addr+"/v1/evaluate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
