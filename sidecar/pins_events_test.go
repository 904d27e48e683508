package sidecar

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

// TestPinDriftIsAnEventOnTheMCPUpstreamOnce: a --configmap sidecar whose
// bundle pins its upstream "files" (pay pinned to another definition, the
// other tools not pinned) hides every drifted tool, and writes one
// Warning Event on the MCPUpstream per drift, as the identity the
// injector's Role (webhook.SidecarRoleRules) makes it, however often the
// tools are listed.
func TestPinDriftIsAnEventOnTheMCPUpstreamOnce(t *testing.T) {
	env := &envtest.Environment{BinaryAssetsDirectory: envtestAssets(t), ControlPlaneStopTimeout: 3 * time.Second,
		CRDDirectoryPaths: []string{"../config/crd/bases"}, ErrorIfCRDPathMissing: true}
	admin, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	const ns, name = "team-p", "toolgate-bundle"
	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(admin)
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	up := startMCPServer(t)
	b := denyTools("Bash")
	b.Pins = []engine.UpstreamPins{{Upstream: "files", Pinning: "strict", Tools: map[string]string{"pay": strings.Repeat("0", 64)}}}
	_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, bundleConfigMap(t, ns, name, b, false), metav1.CreateOptions{})
	must(t, err)

	// The sidecar's identity holds the injector's Role, nothing more.
	user, err := env.AddUser(envtest.User{Name: "toolgate-sidecar"}, admin)
	must(t, err)
	_, err = kc.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "sidecar"}, Rules: webhook.SidecarRoleRules(name)}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sidecar"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "sidecar"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "toolgate-sidecar"}}}, metav1.CreateOptions{})
	must(t, err)

	o := testOptions()
	o.ConfigMap, o.AgentID = ns+"/"+name, "agent-1"
	o.Kubeconfig = testenv.WriteKubeconfig(t, testenv.Kubeconfig(t, user.Config()))
	o.MCP.Listen, o.MCP.Upstreams = "127.0.0.1:0", []string{"files=" + up.endpoint("2025-11-25")}
	proxyAddr := make(chan net.Addr, 1)
	o.MCP.OnListen = func(a net.Addr) { proxyAddr <- a }
	base := startRun(t, o)
	rig := &mcpRig{t: t, decisions: base, proxy: "http://" + (<-proxyAddr).String() + "/mcp/files"}
	eventually(t, "the bundle", func() bool { return readyRevision(t, base) != "" })

	cs := rig.connect("2025-11-25", nil, nil)
	for range 3 {
		if got := listTools(t, cs); got != "" {
			t.Fatalf("tools/list: %q, want every tool hidden (pay changed, the rest not pinned)", got)
		}
	}
	want := []string{"ToolDefinitionChanged pay", "ToolNotPinned delete_file", "ToolNotPinned echo", "ToolNotPinned query", "ToolNotPinned read_file", "ToolNotPinned route", "ToolNotPinned stream"}
	var got []string
	drifts := func() []string {
		list, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=files"})
		must(t, err)
		var out []string
		for _, ev := range list.Items {
			if ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Kind != "MCPUpstream" || ev.ReportingController != ReportingController {
				t.Errorf("event %+v", ev)
			}
			tool, _, _ := strings.Cut(strings.TrimPrefix(ev.Message, "MCP upstream files lists tool "), " ")
			out = append(out, ev.Reason+" "+strings.TrimSuffix(tool, ","))
		}
		slices.Sort(out)
		return out
	}
	eventually(t, "one Event per drift", func() bool { got = drifts(); return len(got) >= len(want) })
	listTools(t, cs)
	time.Sleep(500 * time.Millisecond) // an Event a fourth list wrongly made would be written by now
	if got = drifts(); !slices.Equal(got, want) {
		t.Errorf("Events %q, want each drift once: %q", got, want)
	}
	for tool, kind := range map[string]string{"pay": "changed", "read_file": "unpinned"} {
		series := fmt.Sprintf(`toolgate_sidecar_mcp_tool_drift_total{kind=%q,tool=%q,upstream="files"}`, kind, tool)
		if v := metricValue(t, base, series); v != 1 {
			t.Errorf("%s = %v after four lists, want 1", series, v)
		}
	}
}
