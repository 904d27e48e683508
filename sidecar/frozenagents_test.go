package sidecar

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// agentDecision asks about Read (allowed by the bundle) as agent.
func agentDecision(t *testing.T, base, agent string) engine.Result {
	t.Helper()
	return evaluate(t, base, fmt.Sprintf(`{"tool_name":"Read","agent_id":%q}`, agent)).Result
}

func frozen(r engine.Result) bool {
	return r.Decision == engine.Deny && r.Code == engine.CodeAgentFrozen
}

// FrozenAgents reach a --configmap sidecar straight from the API, with no
// operator running in this test at all: the bundle ConfigMap is written by
// the test and never names the freezes. The sidecar's identity holds only
// what the injector grants: the bundle ConfigMap and frozenagents in its
// namespace, get/list/watch.
func TestFrozenAgentsFromTheAPI(t *testing.T) {
	env := &envtest.Environment{BinaryAssetsDirectory: envtestAssets(t), ControlPlaneStopTimeout: 3 * time.Second,
		CRDDirectoryPaths: []string{"../config/crd/bases"}, ErrorIfCRDPathMissing: true}
	admin, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	const ns, name = "team-f", "toolgate-bundle"
	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(admin)
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, bundleConfigMap(t, ns, name, denyTools("Bash"), false), metav1.CreateOptions{})
	must(t, err)
	cl, err := client.New(admin, client.Options{})
	must(t, err)
	must(t, v1alpha1.AddToScheme(cl.Scheme()))

	// First without the frozenagents grant: the watch is forbidden, the
	// sidecar serves the bundle and says what is missing.
	identity := sidecarIdentity(t, env, admin, ns, name)
	o := testOptions()
	o.ConfigMap, o.AgentID, o.ServiceAccount = ns+"/"+name, "agent-1", "bot-sa"
	o.Kubeconfig = testenv.WriteKubeconfig(t, testenv.Kubeconfig(t, identity))
	// The MCP proxy too: a freeze from the API hides the agent's tools.
	up := startMCPServer(t)
	o.MCP.Listen, o.MCP.Upstreams = "127.0.0.1:0", []string{"pay=" + up.endpoint("2025-11-25")}
	proxyAddr := make(chan net.Addr, 1)
	o.MCP.OnListen = func(a net.Addr) { proxyAddr <- a }
	base := startRun(t, o)
	rig := &mcpRig{t: t, decisions: base, proxy: "http://" + (<-proxyAddr).String() + "/mcp/pay"}
	eventually(t, "the bundle", func() bool { return readyRevision(t, base) != "" })
	eventually(t, "the forbidden watch reported in /readyz", func() bool {
		_, body := get(t, base+"/readyz")
		return strings.Contains(body, `"watching":false`) && strings.Contains(body, "forbidden")
	})
	if up, fails := metricValue(t, base, "toolgate_sidecar_frozen_watch_up"), metricValue(t, base, "toolgate_sidecar_frozen_watch_failures_total"); up != 0 || fails < 1 {
		t.Errorf("frozen_watch_up %v, failures %v", up, fails)
	}
	if r := agentDecision(t, base, "agent-1"); r.Decision != engine.Allow {
		t.Errorf("while the watch is forbidden: %+v", r)
	}

	// The grant the injector gives (the same rule; see webhook.bundleReader):
	// the reflector's retry picks it up.
	_, err = kc.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "frozen-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"frozenagents"},
			Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "frozen-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "frozen-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "toolgate-sidecar"}}}, metav1.CreateOptions{})
	must(t, err)
	eventually(t, "the watch to recover", func() bool {
		_, body := get(t, base+"/readyz")
		return strings.Contains(body, `"watching":true`)
	})

	create := func(fa *v1alpha1.FrozenAgent) time.Time {
		t.Helper()
		fa.Namespace = ns
		must(t, cl.Create(ctx, fa))
		return time.Now()
	}
	t.Run("by agent id, within a second, no operator", func(t *testing.T) {
		at := create(&v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "f-agent"},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: "Agent-1", Reason: "INC-1"}})
		for !frozen(agentDecision(t, base, "agent-1")) {
			if time.Since(at) > time.Second {
				t.Fatalf("not frozen 1 s after the FrozenAgent was created")
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Logf("frozen %d ms after create", time.Since(at).Milliseconds())
		if r := agentDecision(t, base, "agent-1"); r.Reason != "INC-1" {
			t.Errorf("reason %q", r.Reason)
		}
		must(t, cl.Delete(ctx, &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f-agent"}}))
		eventually(t, "unfrozen after delete", func() bool { return !frozen(agentDecision(t, base, "agent-1")) })
	})
	t.Run("the MCP proxy hides a frozen agent's tools and tells its streams", func(t *testing.T) {
		changed := make(chan struct{}, 8)
		cs := rig.connect("2025-11-25", &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		}, nil)
		if got := listTools(t, cs); got != "delete_file echo pay query read_file route stream" {
			t.Fatalf("tools/list before the freeze: %q", got)
		}
		waitChanged := func(what string) {
			t.Helper()
			select {
			case <-changed:
			case <-time.After(20 * time.Second):
				t.Fatalf("no notifications/tools/list_changed after %s", what)
			}
		}
		create(&v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "f-mcp"},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: "agent-1", Reason: "INC-2"}})
		waitChanged("the freeze")
		if got := listTools(t, cs); got != "" {
			t.Fatalf("tools/list of a frozen agent: %q, want none", got)
		}
		must(t, cl.Delete(ctx, &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f-mcp"}}))
		waitChanged("the thaw")
		if got := listTools(t, cs); got != "delete_file echo pay query read_file route stream" {
			t.Fatalf("tools/list after the thaw: %q", got)
		}
	})
	t.Run("expiry on the sidecar's clock", func(t *testing.T) {
		end := metav1.NewTime(time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second))
		create(&v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "f-expiring"},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: "agent-1", ExpiresAt: &end}})
		eventually(t, "frozen", func() bool { return frozen(agentDecision(t, base, "agent-1")) })
		// Nothing changes in the API: the sidecar's own clock ends it.
		eventually(t, "unfrozen at expiresAt", func() bool { return !frozen(agentDecision(t, base, "agent-1")) })
		if time.Now().Before(end.Time) {
			t.Errorf("unfrozen before expiresAt %v", end)
		}
		must(t, cl.Delete(ctx, &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f-expiring"}}))
	})
}

// TestFreezeByServiceAccountIgnoresAgentID: a FrozenAgent naming the
// service account the sidecar runs as freezes it whatever agent id it
// decides for; one naming another service account does not.
func TestFreezeByServiceAccountIgnoresAgentID(t *testing.T) {
	b := denyTools("Bash")
	b.FrozenAgents = []engine.FrozenAgent{{ServiceAccount: "bot-sa", Reason: "INC-SA"}}
	doc, _ := encode(t, b)
	for _, tc := range []struct {
		sa, agentID string
		frozen      bool
	}{
		{"bot-sa", "agent-1", true},
		{"bot-sa", "", true},
		{"bot-sa", "bot-sa-renamed", true},
		{"other-sa", "bot-sa", false},
		{"", "agent-1", false},
	} {
		o := testOptions()
		o.ServiceAccount, o.AgentID = tc.sa, tc.agentID
		s, base := newTestServer(t, o)
		must(t, s.LoadDocument(doc, false))
		for _, agent := range []string{"agent-1", "agent-2", "bot-sa"} {
			r := agentDecision(t, base, agent)
			if frozen(r) != tc.frozen {
				t.Errorf("--service-account=%q --agent-id=%q, request agent %q: %+v, want frozen=%v", tc.sa, tc.agentID, agent, r, tc.frozen)
			}
		}
	}
}

// TestAttackClientCannotClaimAnotherServiceAccount: the agent next to a
// frozen sidecar names another service account (and agent) in every field
// it might be read from; the sidecar decides with its own flag.
func TestAttackClientCannotClaimAnotherServiceAccount(t *testing.T) {
	b := denyTools("Bash")
	b.FrozenAgents = []engine.FrozenAgent{{ServiceAccount: "frozen-sa"}}
	doc, _ := encode(t, b)
	o := testOptions()
	o.ServiceAccount = "frozen-sa"
	s, base := newTestServer(t, o)
	must(t, s.LoadDocument(doc, false))
	for _, body := range []string{
		`{"tool_name":"Read","agent_id":"innocent","service_account":"innocent-sa"}`,
		`{"tool_name":"Read","agent_id":"innocent","serviceAccount":"innocent-sa","service_account_name":"innocent-sa"}`,
		`{"tool_name":"Read","agent_id":"innocent","input":{"serviceAccount":"innocent-sa"}}`,
	} {
		if r := evaluate(t, base, body).Result; !frozen(r) {
			t.Errorf("%s: %+v, want AGENT_FROZEN", body, r)
		}
	}
	// And a sidecar running as another service account cannot be frozen by
	// a request claiming the frozen one either: the request is not read.
	o.ServiceAccount = "innocent-sa"
	s2, base2 := newTestServer(t, o)
	must(t, s2.LoadDocument(doc, false))
	if r := evaluate(t, base2, `{"tool_name":"Read","agent_id":"x","serviceAccount":"frozen-sa"}`).Result; frozen(r) {
		t.Errorf("claimed frozen service account: %+v", r)
	}
}

func TestServiceAccountFlagIsValidated(t *testing.T) {
	o := testOptions()
	o.BundleFile = "b.json"
	o.ServiceAccount = "Not A Name"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `--service-account "Not A Name" is not a ServiceAccount name`) {
		t.Errorf("Validate: %v", err)
	}
}
