package sidecar

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/bundlesource"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// envtestAssets finds kube-apiserver and etcd: KUBEBUILDER_ASSETS, or the
// directory hack/setup-envtest.sh builds them into (its last stdout line).
// It fails rather than skips: these tests are the point.
func envtestAssets(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	out, err := exec.Command("bash", "../hack/setup-envtest.sh").Output()
	if err != nil {
		t.Fatalf("hack/setup-envtest.sh failed (set KUBEBUILDER_ASSETS or fix the build): %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func startEnvtest(t *testing.T) (*envtest.Environment, *rest.Config) {
	t.Helper()
	// kube-apiserver drains open watches for up to a minute on SIGTERM; the
	// outage test wants it gone, and envtest kills it after this timeout.
	env := &envtest.Environment{BinaryAssetsDirectory: envtestAssets(t), ControlPlaneStopTimeout: 3 * time.Second}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() }) // a second Stop after the test's own is harmless
	return env, cfg
}

// sidecarIdentity is a user allowed only get/list/watch on the one bundle
// ConfigMap: the least privilege the sidecar claims to need.
func sidecarIdentity(t *testing.T, env *envtest.Environment, admin *rest.Config, ns, name string) *rest.Config {
	t.Helper()
	user, err := env.AddUser(envtest.User{Name: "toolgate-sidecar"}, admin)
	must(t, err)
	c := kubernetes.NewForConfigOrDie(admin)
	ctx := t.Context()
	_, err = c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "toolgate-sidecar"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{name}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "toolgate-sidecar"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "toolgate-sidecar"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "toolgate-sidecar"}},
	}, metav1.CreateOptions{})
	must(t, err)
	return user.Config()
}

// bundleConfigMap is what the operator publishes: bundle.json in data, or
// bundle.json.gz in binaryData.
func bundleConfigMap(t *testing.T, ns, name string, b engine.Bundle, compress bool) *corev1.ConfigMap {
	doc, rev := encode(t, b)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels:      map[string]string{"toolgate.dev/bundle": "true"},
		Annotations: map[string]string{"toolgate.dev/revision": rev}}}
	if compress {
		cm.BinaryData = map[string][]byte{bundle.GzipKey: gzipped(t, doc)}
	} else {
		cm.Data = map[string]string{bundle.Key: string(doc)}
	}
	return cm
}

func TestConfigMapSourceAgainstARealAPIServer(t *testing.T) {
	env, admin := startEnvtest(t)
	const ns, name = "team-a", "toolgate-bundle"
	ctx := context.Background()
	c := kubernetes.NewForConfigOrDie(admin)
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	// A ConfigMap the sidecar must never see: its identity may not read it.
	_, err = c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Data: map[string]string{bundle.Key: "{}"}}, metav1.CreateOptions{})
	must(t, err)

	cacheDir := t.TempDir()
	o := testOptions()
	o.ConfigMap, o.CacheDir, o.AgentID = ns+"/"+name, cacheDir, "agent-1"
	identity := sidecarIdentity(t, env, admin, ns, name)
	o.Kubeconfig = testenv.WriteKubeconfig(t, testenv.Kubeconfig(t, identity))
	// RBAC is on and the identity is as narrow as claimed.
	if _, err := kubernetes.NewForConfigOrDie(identity).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the sidecar identity listing every ConfigMap: %v, want Forbidden", err)
	}
	// A cache left from before the ConfigMap was deleted: the API server
	// answering that it does not exist must win over it.
	stale, err := New(o)
	must(t, err)
	staleDoc, staleRev := encode(t, denyTools("Stale"))
	must(t, stale.loader.Load(staleDoc, false, bundlesource.OriginConfigMap))
	must(t, stale.Close(ctx))

	base := startRun(t, o)
	eventually(t, "the stale cached bundle to be dropped", func() bool { return readyRevision(t, base) != staleRev })
	if got := toolDecision(t, base, "Bash"); got != "deny/NO_POLICIES" {
		t.Errorf("before the ConfigMap exists: %s", got)
	}

	cms := c.CoreV1().ConfigMaps(ns)
	created, err := cms.Create(ctx, bundleConfigMap(t, ns, name, denyTools("Bash"), false), metav1.CreateOptions{})
	must(t, err)
	revA := created.Annotations["toolgate.dev/revision"]
	eventually(t, "the created bundle", func() bool { return readyRevision(t, base) == revA })
	if got := toolDecision(t, base, "Bash") + " " + toolDecision(t, base, "Read"); got != "deny allow" {
		t.Errorf("Bash, Read under A: %s", got)
	}

	update := func(b engine.Bundle, compress bool) string {
		t.Helper()
		cm := bundleConfigMap(t, ns, name, b, compress)
		cur, err := cms.Get(ctx, name, metav1.GetOptions{})
		must(t, err)
		cur.Data, cur.BinaryData, cur.Annotations = cm.Data, cm.BinaryData, cm.Annotations
		_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
		must(t, err)
		return cm.Annotations["toolgate.dev/revision"]
	}
	revB := update(denyTools("Read"), true)
	eventually(t, "the updated (gzip) bundle", func() bool { return readyRevision(t, base) == revB })
	if got := toolDecision(t, base, "Bash") + " " + toolDecision(t, base, "Read"); got != "allow deny" {
		t.Errorf("Bash, Read under B: %s", got)
	}

	cur, err := cms.Get(ctx, name, metav1.GetOptions{})
	must(t, err)
	cur.BinaryData = map[string][]byte{bundle.GzipKey: []byte("not gzip")}
	_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
	must(t, err)
	eventually(t, "the corrupt bundle's rejection", func() bool {
		return metricValue(t, base, "toolgate_sidecar_bundle_reload_failures_total") >= 1
	})
	if readyRevision(t, base) != revB || toolDecision(t, base, "Read") != "deny" {
		t.Error("a corrupt ConfigMap replaced the last good bundle")
	}

	frozen := denyTools("Read")
	frozen.FrozenAgents = []engine.FrozenAgent{{ID: "agent-1", Reason: "incident 9"}}
	revFrozen := update(frozen, false)
	eventually(t, "the freeze", func() bool { return readyRevision(t, base) == revFrozen })
	// The request names another agent; the sidecar decides for its own.
	if d := evaluate(t, base, `{"tool_name":"Bash","agent_id":"agent-2"}`); d.Code != engine.CodeAgentFrozen {
		t.Errorf("after the freeze: %+v, want AGENT_FROZEN", d.Result)
	}

	must(t, cms.Delete(ctx, name, metav1.DeleteOptions{}))
	eventually(t, "unload after delete", func() bool { return readyRevision(t, base) == "" })
	if got := toolDecision(t, base, "Read"); got != "deny/NO_POLICIES" {
		t.Errorf("after delete: %s, want deny/NO_POLICIES", got)
	}

	recreated, err := cms.Create(ctx, bundleConfigMap(t, ns, name, denyTools("Write"), false), metav1.CreateOptions{})
	must(t, err)
	revD := recreated.Annotations["toolgate.dev/revision"]
	eventually(t, "the recreated bundle", func() bool { return readyRevision(t, base) == revD })

	// The sidecar's watch is open, so the API server is killed after the
	// stop timeout: an outage, not a clean shutdown.
	if err := env.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process kube-apiserver") {
		t.Fatalf("stopping the control plane: %v", err)
	}
	if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		t.Fatal("the API server still answers after being stopped")
	}
	for range 20 {
		if got := toolDecision(t, base, "Write") + " " + toolDecision(t, base, "Read"); got != "deny allow" {
			t.Fatalf("with the API server stopped: %s, want the last good bundle's deny allow", got)
		}
	}
	if readyRevision(t, base) != revD {
		t.Error("not ready with the last good bundle while the API server is down")
	}

	// A restart during the outage serves the cached bundle.
	restarted := startRun(t, o)
	if readyRevision(t, restarted) != revD {
		t.Errorf("a sidecar restarted during the outage serves %q, want the cached %q", readyRevision(t, restarted), revD)
	}
	if got := toolDecision(t, restarted, "Write"); got != "deny" {
		t.Errorf("restarted sidecar: Write %s, want deny", got)
	}
}
