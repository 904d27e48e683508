package sidecar

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

// ClusterFrozenAgents, the cluster's kill switch, reach a --configmap
// sidecar straight from the API with no operator running: the test writes
// the bundle ConfigMap itself, with the namespace labels the operator would
// sign into it, and creates the ClusterFrozenAgents. Whether one applies is
// judged against those labels, again for every new bundle; a bundle
// without labels applies every one (fail closed) and /readyz says why.
func TestClusterFrozenAgentsFromTheAPI(t *testing.T) {
	env := &envtest.Environment{BinaryAssetsDirectory: envtestAssets(t), ControlPlaneStopTimeout: 3 * time.Second,
		CRDDirectoryPaths: []string{"../config/crd/bases"}, ErrorIfCRDPathMissing: true}
	admin, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	const ns, name = "team-c", "toolgate-bundle"
	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(admin)
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	var sc string // the sidecar's address, once it runs
	// Signed as the operator signs, and the sidecar trusts only that key:
	// the labels cannot be changed by whoever cannot sign.
	keys := testenv.Keyring(t, 1)
	var lastSig []byte
	write := func(cm *corev1.ConfigMap) {
		t.Helper()
		if _, err := kc.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			must(t, err)
		}
	}
	publish := func(labels map[string]string) {
		t.Helper()
		b := denyTools("Bash")
		b.NamespaceLabels = labels
		cm := bundleConfigMap(t, ns, name, b, false)
		lastSig = keys.Seal(ns, cm.Annotations[v1alpha1.RevisionAnnotation], lastSig, time.Now())
		cm.Data[bundle.SignatureKey] = string(lastSig)
		write(cm)
		_, rev := encode(t, b)
		eventually(t, "bundle "+rev, func() bool { return readyRevision(t, sc) == rev })
	}
	cl, err := client.New(admin, client.Options{})
	must(t, err)
	must(t, v1alpha1.AddToScheme(cl.Scheme()))

	identity := sidecarIdentity(t, env, admin, ns, name)
	// The namespace's FrozenAgents, as the injector grants them.
	_, err = kc.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "frozen-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"frozenagents"},
			Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "frozen-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "frozen-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "toolgate-sidecar"}}}, metav1.CreateOptions{})
	must(t, err)
	o := testOptions()
	o.ConfigMap = ns + "/" + name // no --agent-id: each request names its agent
	o.Kubeconfig = testenv.WriteKubeconfig(t, testenv.Kubeconfig(t, identity))
	o.TrustedKeys = writeFile(t, "keys.pem", keys.PublicPEM())
	sc = startRun(t, o)
	publish(map[string]string{"team": "payments", "kubernetes.io/metadata.name": ns})

	// Without the clusterfrozenagents grant: the watch is forbidden, the
	// sidecar serves the bundle and says what is missing.
	eventually(t, "the forbidden cluster watch reported in /readyz", func() bool {
		_, body := get(t, sc+"/readyz")
		return strings.Contains(body, `"clusterFrozenAgentWatch":{`) && strings.Contains(body, "clusterfrozenagents in the cluster") &&
			strings.Contains(body, "forbidden")
	})
	if up, fails := metricValue(t, sc, "toolgate_sidecar_cluster_frozen_watch_up"), metricValue(t, sc, "toolgate_sidecar_cluster_frozen_watch_failures_total"); up != 0 || fails < 1 {
		t.Errorf("cluster_frozen_watch_up %v, failures %v", up, fails)
	}
	// The grant the chart installs for sidecars (see
	// charts/toolgate/templates/clusterrole-sidecar.yaml): that kind, read.
	_, err = kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cluster-freeze-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"clusterfrozenagents"},
			Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cluster-freeze-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-freeze-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "toolgate-sidecar"}}}, metav1.CreateOptions{})
	must(t, err)
	eventually(t, "the cluster watch to recover", func() bool {
		_, body := get(t, sc+"/readyz")
		return strings.Contains(body, `"clusterFrozenAgentWatch":{"applied":0,"watching":true}`)
	})
	if up := metricValue(t, sc, "toolgate_sidecar_cluster_frozen_watch_up"); up != 1 {
		t.Errorf("cluster_frozen_watch_up %v after the grant", up)
	}

	freeze := func(name, agent string, sel *metav1.LabelSelector) time.Time {
		t.Helper()
		must(t, cl.Create(ctx, &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ClusterFrozenAgentSpec{FrozenAgentSpec: v1alpha1.FrozenAgentSpec{AgentID: agent, Reason: "INC-" + name},
				NamespaceSelector: sel}}))
		return time.Now()
	}
	team := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"team": v}}
	}
	isFrozen := func(agent string) bool { return frozen(agentDecision(t, sc, agent)) }
	// Watch events arrive in order: once agent-3's freeze (created last)
	// is applied, the earlier ones have been judged too.
	freeze("other-team", "agent-2", team("search"))
	at := freeze("payments", "agent-1", team("payments"))
	freeze("everyone", "agent-3", nil)
	for !isFrozen("agent-1") {
		if time.Since(at) > time.Second {
			t.Fatalf("not frozen 1 s after the ClusterFrozenAgent was created")
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("frozen %d ms after create", time.Since(at).Milliseconds())
	eventually(t, "the unselected freeze of every namespace", func() bool { return isFrozen("agent-3") })
	if r := agentDecision(t, sc, "agent-1"); r.Reason != "INC-payments" {
		t.Errorf("reason %q", r.Reason)
	}
	if isFrozen("agent-2") {
		t.Errorf("agent-2 frozen by a ClusterFrozenAgent selecting team=search in a team=payments namespace")
	}
	if n := metricValue(t, sc, "toolgate_sidecar_api_cluster_frozen_agents"); n != 2 {
		t.Errorf("api_cluster_frozen_agents %v, want 2", n)
	}

	t.Run("a new bundle's labels are judged again", func(t *testing.T) {
		publish(map[string]string{"team": "search"})
		if !isFrozen("agent-2") || isFrozen("agent-1") || !isFrozen("agent-3") {
			t.Errorf("after relabelling to team=search: agent-1 %v agent-2 %v agent-3 %v, want false true true",
				isFrozen("agent-1"), isFrozen("agent-2"), isFrozen("agent-3"))
		}
	})
	t.Run("a bundle without labels applies every one, and says so", func(t *testing.T) {
		publish(nil)
		for _, a := range []string{"agent-1", "agent-2", "agent-3"} {
			if !isFrozen(a) {
				t.Errorf("%s not frozen while the namespace's labels are unknown", a)
			}
		}
		_, body := get(t, sc+"/readyz")
		if !strings.Contains(body, `"namespaceLabels":"unknown: the bundle served carries none`) {
			t.Errorf("/readyz does not say the labels are unknown: %s", body)
		}
	})
	t.Run("attack: a relabelled bundle the operator did not sign is refused, the freeze stays", func(t *testing.T) {
		publish(map[string]string{"team": "payments"})
		if !isFrozen("agent-1") {
			t.Fatal("agent-1 not frozen in team=payments")
		}
		// Whoever gets to write the ConfigMap (past the channel policy)
		// relabels the namespace out of the freeze's selector.
		b := denyTools("Bash")
		b.NamespaceLabels = map[string]string{"team": "search"}
		write(bundleConfigMap(t, ns, name, b, false))
		eventually(t, "the forged bundle refused", func() bool {
			_, body := get(t, sc+"/readyz")
			return strings.Contains(body, `"lastRejected"`) && strings.Contains(body, "unsigned")
		})
		if !isFrozen("agent-1") {
			t.Error("agent-1 escaped the cluster freeze with a forged namespace label")
		}
	})
	t.Run("merged with the namespace's FrozenAgents; delete thaws", func(t *testing.T) {
		publish(map[string]string{"team": "payments"})
		must(t, cl.Create(ctx, &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local"},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: "agent-4"}}))
		eventually(t, "the namespace's freeze", func() bool { return isFrozen("agent-4") })
		if !isFrozen("agent-1") {
			t.Errorf("the cluster freeze lost when the namespace's arrived")
		}
		must(t, cl.Delete(ctx, &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "payments"}}))
		eventually(t, "unfrozen after delete", func() bool { return !isFrozen("agent-1") })
		if !isFrozen("agent-4") || !isFrozen("agent-3") {
			t.Errorf("deleting one ClusterFrozenAgent thawed others")
		}
	})
}
