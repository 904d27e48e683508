package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

// TestAttackEditorCannotChooseAgentIdentity plays a namespace editor
// (user mallory with the built-in edit role, impersonated through the API
// with real RBAC) against a namespace whose admins registered its agents,
// with the real toolgate manager (operator and injector) and real sidecar
// processes that learn their ServiceAccount from the API server. Before
// this, the agent id, roles, environment and MCP upstreams came from the
// Pod's annotations and the sidecar's arguments, so the editor chose them
// all, and a new ServiceAccount escaped a freeze by ServiceAccount.
func TestAttackEditorCannotChooseAgentIdentity(t *testing.T) {
	const ns, editor = "governed", "mallory"
	dir := t.TempDir()
	bin, cluster := startCluster(t, dir)
	c := cluster.Client
	ctx := context.Background()

	str := func(s string) *apiextensionsv1.JSON { b, _ := json.Marshal(s); return &apiextensionsv1.JSON{Raw: b} }
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{v1alpha1.LabelEnvironment: "prod"}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing-bot"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "triage-bot"}},
		&v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing"},
			Spec: v1alpha1.AgentSpec{ServiceAccountName: "billing-bot", AgentID: "billing-bot-7", Roles: []string{"reader"}, Upstreams: []string{"github"}}},
		&v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "triage"}, Spec: v1alpha1.AgentSpec{ServiceAccountName: "triage-bot"}},
		&v1alpha1.MCPUpstream{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "github"}, Spec: v1alpha1.MCPUpstreamSpec{URL: "http://127.0.0.1:9/mcp"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	installAggregatedRoles(t, c)
	testenv.BindEdit(t, c, ns, editor)
	asEditor := testenv.Impersonate(t, cluster.Env.Config, editor)
	mgrArgs := append(cluster.ManagerArgs(), "--sidecar-image", "toolgate:e2e")
	mgr, err := cluster.StartProcess("manager", bin, mgrArgs...)
	if err != nil {
		t.Fatal(err)
	}
	policy := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "identity"},
		Spec: v1alpha1.PolicySpec{DefaultEffect: v1alpha1.EffectAllow, Rules: []v1alpha1.Rule{
			{ID: "payments-role-only", Effect: v1alpha1.RuleDeny, Conditions: []v1alpha1.Condition{
				{Field: "tool_name", Operator: "eq", Value: str("refund")},
				{Field: "roles", Operator: "not_contains", Value: str("payments")}}},
			{ID: "no-shell-in-prod", Effect: v1alpha1.RuleDeny, Conditions: []v1alpha1.Condition{
				{Field: "tool_name", Operator: "eq", Value: str("Bash")},
				{Field: "environment", Operator: "neq", Value: str("dev")}}},
		}}}
	testenv.Eventually(t, "the Policy webhook to admit the Policy", func() (bool, string) {
		if err := c.Create(ctx, policy.DeepCopy()); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	defer func() {
		if t.Failed() {
			for _, name := range []string{"manager", "sidecar-billing", "sidecar-triage", "sidecar-rogue"} {
				if b, err := os.ReadFile(filepath.Join(dir, name+".log")); err == nil {
					t.Logf("%s log (tail):\n%s", name, tail(string(b), 3000))
				}
			}
		}
	}()

	t.Run("edit only reads Agents and MCPUpstreams", func(t *testing.T) {
		for _, o := range []client.Object{
			&v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}, Spec: v1alpha1.AgentSpec{ServiceAccountName: "rogue", Roles: []string{"payments"}}},
			&v1alpha1.MCPUpstream{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exfil"}, Spec: v1alpha1.MCPUpstreamSpec{URL: "http://127.0.0.1:9/x"}},
		} {
			if err := asEditor.Create(ctx, o); !apierrors.IsForbidden(err) {
				t.Errorf("edit created %T %s: %v, want Forbidden", o, o.GetName(), err)
			}
		}
		var billing v1alpha1.Agent
		if err := asEditor.Get(ctx, client.ObjectKey{Namespace: ns, Name: "billing"}, &billing); err != nil {
			t.Fatalf("edit cannot read Agents: %v", err)
		}
		billing.Spec.Roles = append(billing.Spec.Roles, "payments")
		if err := asEditor.Update(ctx, &billing); !apierrors.IsForbidden(err) {
			t.Errorf("edit updated Agent billing: %v, want Forbidden", err)
		}
		if err := asEditor.Delete(ctx, &billing); !apierrors.IsForbidden(err) {
			t.Errorf("edit deleted Agent billing: %v, want Forbidden", err)
		}
	})

	// The injector serves once the manager is up; an annotated Pod it did
	// not see would be admitted without a sidecar (failurePolicy Ignore).
	admitted := func(cl client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
		var stored *corev1.Pod
		var createErr error
		testenv.Eventually(t, "the injector to answer for "+pod.Name, func() (bool, string) {
			createErr = cl.Create(ctx, pod.DeepCopy())
			if createErr != nil {
				return strings.Contains(createErr.Error(), "toolgate") || strings.Contains(createErr.Error(), "Agent"), createErr.Error()
			}
			var got corev1.Pod
			if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
				return false, err.Error()
			}
			if got.Labels[v1alpha1.LabelInjected] != "true" {
				_ = c.Delete(ctx, &got)
				return false, "admitted before the injector served"
			}
			stored = &got
			return true, ""
		})
		return stored, createErr
	}
	agentPod := func(name, sa string, annotations map[string]string) *corev1.Pod {
		a := map[string]string{v1alpha1.AnnotationInject: "true"}
		for k, v := range annotations {
			a[k] = v
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: a},
			Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "agent", Image: "agent"}}}}
	}

	t.Run("a new ServiceAccount's Pod is refused", func(t *testing.T) {
		// The incident: billing-bot is frozen by ServiceAccount; the editor
		// makes a new ServiceAccount and rolls the agent onto it.
		freeze := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "freeze-billing-bot"},
			Spec: v1alpha1.FrozenAgentSpec{ServiceAccount: "billing-bot", Reason: "INC-23"}}
		if err := c.Create(ctx, freeze); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Delete(ctx, freeze) }()
		if err := asEditor.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rogue"}}); err != nil {
			t.Fatalf("edit may create ServiceAccounts: %v", err)
		}
		_, err := admitted(asEditor, agentPod("rogue-agent", "rogue", map[string]string{v1alpha1.AnnotationAgentID: "billing-bot-7"}))
		if err == nil || !strings.Contains(err.Error(), `ServiceAccount "rogue" has no Agent`) || !strings.Contains(err.Error(), "an admin of the namespace must create an Agent") {
			t.Errorf("Pod as an unregistered ServiceAccount: %v, want refused naming it and the remedy", err)
		}
	})

	t.Run("the Pod's annotations choose no identity", func(t *testing.T) {
		pod, err := admitted(asEditor, agentPod("billing-agent", "billing-bot", map[string]string{
			v1alpha1.AnnotationAgentID: "boss", v1alpha1.AnnotationRoles: "payments,admin", v1alpha1.AnnotationEnvironment: "dev",
			webhook.AnnotationMCPUpstreams: "github"}))
		if err != nil {
			t.Fatalf("registered Pod refused: %v", err)
		}
		sc := sidecarOf(pod)
		if sc == nil {
			t.Fatal("no sidecar injected")
		}
		for _, want := range []string{"--roles=reader", "--environment=prod", "--mcp-upstream=github=http://127.0.0.1:9/mcp"} {
			if !slices.Contains(sc.Args, want) {
				t.Errorf("sidecar args %q lack %s", sc.Args, want)
			}
		}
		for _, e := range sc.Env {
			if e.Name == "TOOLGATE_AGENT_ID" && e.Value != "billing-bot-7" {
				t.Errorf("TOOLGATE_AGENT_ID %+v, want billing-bot-7", e)
			}
		}
	})

	t.Run("upstreams are the Agent's MCPUpstreams, by name", func(t *testing.T) {
		for name, annotation := range map[string]string{
			"inline":         "github=http://127.0.0.1:9/exfil",
			"not the agents": "gitlab",
			"not registered": "github,jira",
		} {
			_, err := admitted(asEditor, agentPod("up-"+strings.ReplaceAll(name, " ", "-"), "billing-bot", map[string]string{webhook.AnnotationMCPUpstreams: annotation}))
			if err == nil || !strings.Contains(err.Error(), "MCPUpstream") {
				t.Errorf("%s (%q): %v, want refused naming MCPUpstream", name, annotation, err)
			}
		}
	})

	// Sidecars as real processes, each with its ServiceAccount's
	// credentials (impersonated), and arguments lying about who it is.
	sidecar := func(name, sa string, lies ...string) string {
		addr := testenv.FreeLoopbackAddr(t)
		args := append([]string{"sidecar", "--configmap", ns + "/toolgate-bundle",
			"--kubeconfig", impersonatingKubeconfig(t, cluster, fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)),
			"--listen", addr, "--decision-log", "none"}, lies...)
		if _, err := cluster.StartProcess(name, bin, args...); err != nil {
			t.Fatal(err)
		}
		return addr
	}
	// The rogue ServiceAccount may read the bundle (as if an admin had
	// granted it), so what denies it is its identity, not its RBAC.
	var rb rbacv1.RoleBinding
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "toolgate-bundle-reader"}, &rb); err != nil {
		t.Fatal(err)
	}
	rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "rogue"},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "triage-bot"})
	if err := c.Update(ctx, &rb); err != nil {
		t.Fatal(err)
	}
	billing := sidecar("sidecar-billing", "billing-bot", "--service-account=triage-bot", "--agent-id=boss", "--roles=payments", "--environment=dev")
	triage := sidecar("sidecar-triage", "triage-bot")
	rogue := sidecar("sidecar-rogue", "rogue", "--service-account=billing-bot", "--agent-id=billing-bot-7")

	claims := map[string]any{"agent_id": "boss", "roles": []string{"payments"}, "environment": "dev"}
	req := func(tool string) map[string]any {
		r := map[string]any{"tool_name": tool}
		for k, v := range claims {
			r[k] = v
		}
		return r
	}
	t.Run("sidecars decide as the registered Agent", func(t *testing.T) {
		answersEventually(t, billing, req("refund"), "deny payments-role-only (the Agent's roles are [reader])", is("deny", "", "payments-role-only"))
		answersEventually(t, billing, req("Bash"), "deny no-shell-in-prod (the namespace is prod)", is("deny", "", "no-shell-in-prod"))
		answersEventually(t, triage, req("read_file"), "allow", is("allow", "", ""))
		d := answersEventually(t, rogue, req("read_file"), "deny AGENT_UNREGISTERED", is("deny", "AGENT_UNREGISTERED", ""))
		if !strings.Contains(d.Reason, `"rogue"`) {
			t.Errorf("rogue's deny %q does not name its ServiceAccount", d.Reason)
		}
	})

	t.Run("allAgents freeze, operator stopped", func(t *testing.T) {
		mgr.Stop()
		if !mgr.Exited() {
			t.Fatal("the manager did not stop")
		}
		freeze := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "freeze-all"},
			Spec: v1alpha1.FrozenAgentSpec{AllAgents: true, Reason: "INC-24: stop everything"}}
		start := time.Now()
		if err := c.Create(ctx, freeze); err != nil {
			t.Fatal(err)
		}
		for name, addr := range map[string]string{"billing": billing, "triage": triage} {
			for {
				d, err := evaluate(addr, req("read_file"))
				took := time.Since(start)
				if err == nil && d.Code == "AGENT_FROZEN" && d.Reason == freeze.Spec.Reason {
					t.Logf("%s frozen %d ms after the allAgents FrozenAgent was created (bound 1000 ms)", name, took.Milliseconds())
					break
				}
				if took > time.Second {
					t.Fatalf("%s not frozen 1 s after create: %v %v", name, d, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
}

// installAggregatedRoles applies config/rbac/aggregated_roles.yaml, as the
// kustomize install does (under names of its own), so BindEdit's copy of
// edit carries what toolgate aggregates into it.
func installAggregatedRoles(t *testing.T, c client.Client) {
	t.Helper()
	f, err := os.Open("../../config/rbac/aggregated_roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); err != nil {
			break
		}
		role.Name = "toolgate-aggregated-" + role.Name
		if err := c.Create(context.Background(), &role); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func sidecarOf(pod *corev1.Pod) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == webhook.SidecarName {
				return &list[i]
			}
		}
	}
	return nil
}
