package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/testenv"
)

// impersonatingKubeconfig writes a kubeconfig that acts as user (the admin
// credentials plus impersonation): the sidecar then holds exactly that
// user's RBAC, as it would with the Pod's token.
func impersonatingKubeconfig(t *testing.T, cluster *localcluster.Cluster, user string) string {
	t.Helper()
	kc, err := clientcmd.Load(cluster.Env.KubeConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+filepath.Base(user))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAttackFreezeReachesSidecarWithoutOperator: the operator is stopped
// (crashed, failing over, or unable to publish) when an incident needs the
// kill switch. Before, a FrozenAgent reached sidecars only in the bundle
// the operator publishes, so it never arrived; now a --configmap sidecar
// watches FrozenAgents itself. Real processes: the toolgate manager, whose
// injector grants the Pod's service account its RBAC, and a sidecar acting
// as that service account.
func TestAttackFreezeReachesSidecarWithoutOperator(t *testing.T) {
	const ns, sa = "incident", "billing-bot"
	dir := t.TempDir()
	bin, cluster := startCluster(t, dir)
	c := cluster.Client
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	mgrArgs := append(cluster.ManagerArgs(), "--sidecar-image", "toolgate:e2e")
	mgr, err := cluster.StartProcess("manager", bin, mgrArgs...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for _, name := range []string{"manager", "manager-again", "sidecar"} {
				if b, err := os.ReadFile(filepath.Join(dir, name+".log")); err == nil {
					t.Logf("%s log (tail):\n%s", name, tail(string(b), 3000))
				}
			}
		}
	}()

	// The injector admits an agent Pod and grants its service account what
	// the sidecar needs; the sidecar runs with that grant alone.
	agentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent",
		Annotations: map[string]string{v1alpha1.AnnotationInject: "true", v1alpha1.AnnotationAgentID: "agent-7"}},
		Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "agent", Image: "agent"}}}}
	testenv.Eventually(t, "the injector to admit the agent Pod", func() (bool, string) {
		err := c.Create(ctx, agentPod.DeepCopy())
		if err != nil {
			return false, err.Error()
		}
		var stored corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(agentPod), &stored); err != nil {
			return false, err.Error()
		}
		if stored.Labels[v1alpha1.LabelInjected] != "true" {
			_ = c.Delete(ctx, &stored)
			return false, "admitted before the injector served (failurePolicy Ignore)"
		}
		return true, ""
	})
	kubeconfig := impersonatingKubeconfig(t, cluster, fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa))
	addr := testenv.FreeLoopbackAddr(t)
	if _, err := cluster.StartProcess("sidecar", bin, "sidecar", "--configmap", ns+"/toolgate-bundle",
		"--kubeconfig", kubeconfig, "--listen", addr, "--decision-log", "none",
		"--agent-id", "agent-7", "--service-account", sa); err != nil {
		t.Fatal(err)
	}
	guardrails := policy("guardrails", "")
	guardrails.Namespace = ns
	if err := c.Create(ctx, guardrails); err != nil {
		t.Fatal(err)
	}
	ls := map[string]any{"tool_name": "Bash", "agent_id": "agent-7", "input": map[string]any{"command": "ls"}}
	answersEventually(t, addr, ls, "allow (the bundle is published)", is("allow", "", ""))

	mgr.Stop()
	if !mgr.Exited() {
		t.Fatal("the manager did not stop")
	}

	t.Run("by agent id", func(t *testing.T) {
		freeze := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "freeze-agent-7"},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: "agent-7", Reason: "INC-7, operator down"}}
		took := measureFreeze(t, c, freeze, addr, ls)
		t.Logf("manager stopped: frozen by agent id %d ms after create (bound 1000 ms)", took.Milliseconds())
		if err := c.Delete(ctx, freeze); err != nil {
			t.Fatal(err)
		}
		answersEventually(t, addr, ls, "allow after the freeze is deleted", is("allow", "", ""))
	})
	t.Run("by service account, whatever agent id the request names", func(t *testing.T) {
		freeze := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "freeze-sa"},
			Spec: v1alpha1.FrozenAgentSpec{ServiceAccount: sa, Reason: "INC-8"}}
		other := map[string]any{"tool_name": "Bash", "agent_id": "not-agent-7", "input": map[string]any{"command": "ls"}}
		took := measureFreeze(t, c, freeze, addr, other)
		t.Logf("manager stopped: frozen by service account %d ms after create", took.Milliseconds())
	})

	// The operator comes back and confirms the freeze in its bundle.
	if _, err := cluster.StartProcess("manager-again", bin, mgrArgs...); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the restarted operator to publish the freeze", func() (bool, string) {
		var fa v1alpha1.FrozenAgent
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "freeze-sa"}, &fa); err != nil {
			return false, err.Error()
		}
		return fa.Status.BundleRevision != "", fmt.Sprintf("%+v", fa.Status)
	})
	d, err := evaluate(addr, ls)
	if err != nil || d.Decision != "deny" || d.Code != "AGENT_FROZEN" || d.Reason != "INC-8" {
		t.Errorf("with the operator back: %v %v", d, err)
	}
}

// measureFreeze creates freeze and returns how long until the sidecar
// denies req AGENT_FROZEN; past 1 s it fails.
func measureFreeze(t *testing.T, c client.Client, freeze *v1alpha1.FrozenAgent, addr string, req map[string]any) time.Duration {
	t.Helper()
	if d, err := evaluate(addr, req); err != nil || d.Decision != "allow" {
		t.Fatalf("before the freeze: %v %v", d, err)
	}
	start := time.Now()
	if err := c.Create(context.Background(), freeze); err != nil {
		t.Fatal(err)
	}
	for {
		d, err := evaluate(addr, req)
		took := time.Since(start)
		if err == nil && d.Decision == "deny" && d.Code == "AGENT_FROZEN" {
			if d.Reason != freeze.Spec.Reason {
				t.Errorf("reason %q", d.Reason)
			}
			return took
		}
		if took > time.Second {
			t.Fatalf("not frozen 1 s after the FrozenAgent was created (manager stopped): %v %v", d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
