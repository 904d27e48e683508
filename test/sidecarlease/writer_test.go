package sidecarlease

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/testenv"
)

// signedBundle is a namespace's bundle as the operator publishes it: one
// Policy allowing everything (its generation makes the revision), sealed
// by keys for ns.
func signedBundle(t *testing.T, keys *bundle.Keyring, ns string, generation int64) (data map[string]string, revision string) {
	t.Helper()
	allowAll := v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-all", Generation: generation},
		Spec: v1alpha1.PolicySpec{DefaultEffect: v1alpha1.EffectAllow, Rules: []v1alpha1.Rule{{ID: "all", Effect: v1alpha1.RuleAllow}}}}
	b, _ := bundle.BuildSources(bundle.Sources{Policies: []v1alpha1.Policy{allowAll}}, time.Now())
	doc, rev, err := engine.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{bundle.Key: string(doc), bundle.SignatureKey: string(keys.Seal(ns, rev, nil, time.Now()))}, rev
}

// TestSidecarProcessWritesItsLease runs the real `toolgate sidecar`
// binary as an injected sidecar runs: --configmap, trusted keys, the
// injector's --lease-pod and --lease-pod-uid, and a kubeconfig holding
// only a ServiceAccount token bound to its Pod object, with the Role
// injection grants and the sidecar Lease admission policy installed. It
// writes its Lease at start with the revision it serves, at once when a
// FrozenAgent and a ClusterFrozenAgent start applying, when it refuses a
// bundle signed by a key it does not trust (naming that revision and why)
// and when it loads a good one again; and renews it every 10 s.
func TestSidecarProcessWritesItsLease(t *testing.T) {
	requireLeasePolicy(t)
	ns := newAgentNamespace(t, "lease-writer-", "agent-0")
	pod := ns.pods["agent-0"]
	grantClusterFreezes(t)

	keys, untrusted := testenv.Keyring(t, 1), testenv.Keyring(t, 1)
	trusted, rev1 := publish(t, keys, ns.name)

	sock := startSidecar(t, ns, "agent-0", pod, trusted)

	lease := func() (*coordinationv1.Lease, v1alpha1.SidecarReport, string) {
		var l coordinationv1.Lease
		if err := admin.Get(ctx(t), client.ObjectKey{Namespace: ns.name, Name: pod.Name}, &l); err != nil {
			return nil, v1alpha1.SidecarReport{}, err.Error()
		}
		r, err := v1alpha1.ParseSidecarReport(l.Annotations)
		if err != nil {
			return &l, r, err.Error()
		}
		return &l, r, ""
	}
	waitReport := func(what string, ok func(v1alpha1.SidecarReport) bool) (*coordinationv1.Lease, v1alpha1.SidecarReport) {
		t.Helper()
		var l *coordinationv1.Lease
		var r v1alpha1.SidecarReport
		testenv.Eventually(t, what, func() (bool, string) {
			var why string
			l, r, why = lease()
			if why != "" {
				return false, why
			}
			return ok(r), strings.Join([]string{"report", r.Revision, strings.Join(r.Frozen, ","), r.RefusedRevision, r.RefusedReason}, " | ")
		})
		return l, r
	}

	// At start: the revision served, no freeze, no refusal, the Lease as
	// the shared design says.
	l, r := waitReport("the Lease names the revision served", func(r v1alpha1.SidecarReport) bool { return r.Revision == rev1 })
	if l.Labels[v1alpha1.LabelSidecar] != "true" {
		t.Errorf("labels %v lack %s", l.Labels, v1alpha1.LabelSidecar)
	}
	if o := l.OwnerReferences; len(o) != 1 || o[0].APIVersion != "v1" || o[0].Kind != "Pod" || o[0].Name != pod.Name || o[0].UID != pod.UID {
		t.Errorf("owner references %+v, want Pod %s %s: the garbage collector deletes the Lease with its Pod", o, pod.Name, pod.UID)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != pod.Name || l.Spec.LeaseDurationSeconds == nil ||
		*l.Spec.LeaseDurationSeconds != v1alpha1.SidecarLeaseDurationSeconds || l.Spec.RenewTime == nil {
		t.Errorf("spec %+v", l.Spec)
	}
	if !v1alpha1.LeaseLive(l.Spec.RenewTime.Time, *l.Spec.LeaseDurationSeconds, time.Now()) {
		t.Errorf("a Lease just written is not live: renewed %v", l.Spec.RenewTime)
	}
	if len(r.Frozen) != 0 || r.FreezeDigest != v1alpha1.FreezeDigest(nil) || r.RefusedReason != "" || r.Version == "" {
		t.Errorf("first report %+v", r)
	}

	// A FrozenAgent, then a ClusterFrozenAgent: named at once.
	fa := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: "stop-bot"},
		Spec: v1alpha1.FrozenAgentSpec{AgentID: "bot", Reason: "INC-1"}}
	if err := admin.Create(ctx(t), fa); err != nil {
		t.Fatal(err)
	}
	waitReport("the Lease names the FrozenAgent", func(r v1alpha1.SidecarReport) bool {
		return slices.Equal(r.Frozen, []string{"FrozenAgent/stop-bot"})
	})
	cfa := &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "lease-incident-" + ns.name},
		Spec: v1alpha1.ClusterFrozenAgentSpec{FrozenAgentSpec: v1alpha1.FrozenAgentSpec{AgentID: "bot2", Reason: "INC-2"}}}
	if err := admin.Create(ctx(t), cfa); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), cfa) })
	want := []string{"ClusterFrozenAgent/" + cfa.Name, "FrozenAgent/stop-bot"}
	_, r = waitReport("the Lease names the ClusterFrozenAgent", func(r v1alpha1.SidecarReport) bool { return slices.Equal(r.Frozen, want) })
	if r.FreezeDigest != v1alpha1.FreezeDigest(want) || !r.Applies("FrozenAgent/stop-bot", "") {
		t.Errorf("report %+v: digest or Applies disagree with %v", r, want)
	}

	// A bundle signed by a key the sidecar does not trust: refused, named,
	// and the old revision still served.
	forged, rev2 := signedBundle(t, untrusted, ns.name, 2)
	updateBundle(t, ns.name, forged)
	_, r = waitReport("the Lease names the refused revision", func(r v1alpha1.SidecarReport) bool { return r.RefusedRevision == rev2 })
	if r.Revision != rev1 || !strings.HasPrefix(r.RefusedReason, "unknown_key: ") {
		t.Errorf("after the refusal: serving %q (want %q), reason %q (want unknown_key: ...)", r.Revision, rev1, r.RefusedReason)
	}
	// A good bundle again: served, the refusal gone.
	good, rev3 := signedBundle(t, keys, ns.name, 3)
	updateBundle(t, ns.name, good)
	l, r = waitReport("the Lease names the new revision", func(r v1alpha1.SidecarReport) bool { return r.Revision == rev3 })
	if r.RefusedRevision != "" || r.RefusedReason != "" || l.Annotations[v1alpha1.AnnotationLeaseRefusedReason] != "" {
		t.Errorf("after a good bundle the refusal stays: %+v", r)
	}

	// Renewed every 10 s, with nothing changed.
	before := l.Spec.RenewTime.Time
	testenv.EventuallyWithin(t, 30*time.Second, 500*time.Millisecond, "the Lease is renewed", func() (bool, string) {
		l, _, why := lease()
		if why != "" {
			return false, why
		}
		return l.Spec.RenewTime.After(before), "renewed " + l.Spec.RenewTime.String()
	})
	l, _, _ = lease()
	if gap := l.Spec.RenewTime.Sub(before); gap < 9*time.Second || gap > 15*time.Second {
		t.Errorf("renewed %v after the last write, want about %d s", gap, v1alpha1.SidecarLeaseRenewSeconds)
	}

	// Every write counted, none failed.
	metrics := get(t, sock, "/metrics")
	for _, line := range []string{`toolgate_sidecar_lease_writes_total{result="created"} 1`, `toolgate_sidecar_lease_writes_total{result="updated"}`} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	if strings.Contains(metrics, `toolgate_sidecar_lease_writes_total{result="error"}`) {
		t.Errorf("a Lease write failed:\n%s", grep(metrics, "lease_writes"))
	}
}

func updateBundle(t *testing.T, ns string, data map[string]string) {
	t.Helper()
	var cm corev1.ConfigMap
	for {
		if err := admin.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: bundle.DefaultConfigMapName}, &cm); err != nil {
			t.Fatal(err)
		}
		cm.Data = data
		err := admin.Update(ctx(t), &cm)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
}

// grantClusterFreezes gives every ServiceAccount read of
// ClusterFrozenAgents, as config/rbac/sidecar_cluster_freezes.yaml does.
func grantClusterFreezes(t *testing.T) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "lease-test-cluster-freezes"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"clusterfrozenagents"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:serviceaccounts"}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx(t), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func unixClient(socket string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
}

// get is GET path from the sidecar's socket.
func get(t *testing.T, socket, path string) string {
	t.Helper()
	resp, err := unixClient(socket).Get("http://sidecar" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grep(text, s string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// publish writes keys' public half to a file for --trusted-keys and the
// namespace's first bundle, signed by keys; it returns the file and the
// bundle's revision.
func publish(t *testing.T, keys *bundle.Keyring, ns string) (trusted, revision string) {
	t.Helper()
	trusted = filepath.Join(t.TempDir(), "keys.pem")
	if err := os.WriteFile(trusted, keys.PublicPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	data, revision := signedBundle(t, keys, ns, 1)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bundle.DefaultConfigMapName}, Data: data}
	if err := admin.Create(ctx(t), cm); err != nil {
		t.Fatal(err)
	}
	return trusted, revision
}

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "tglease-bin")
	if err != nil {
		return "", err
	}
	return localcluster.BuildToolgate(dir)
})

// startSidecar runs `toolgate sidecar` as the injector configures it, with
// a kubeconfig holding only a token bound to Pod tokenPod, reporting in
// leasePod's Lease; it returns the decision socket.
func startSidecar(t *testing.T, ns agentNamespace, tokenPod string, leasePod *corev1.Pod, trusted string) string {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tglease")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	logPath := filepath.Join(dir, "sidecar.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "sidecar", "--configmap", ns.name+"/"+bundle.DefaultConfigMapName,
		"--kubeconfig", tokenKubeconfig(t, ns.podToken(t, tokenPod)), "--trusted-keys", trusted,
		"--listen", "unix:"+sock, "--decision-log", "none",
		"--lease-pod", leasePod.Name, "--lease-pod-uid", string(leasePod.UID))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("sidecar log:\n%s", b)
		}
	})
	return sock
}

// TestALeaseRefusedChangesNoDecision: a sidecar whose Lease writes are all
// refused (told to report as agent-1 while its token is agent-0's) still
// becomes ready and decides; the failures are counted, and no Lease of
// agent-1 appears.
func TestALeaseRefusedChangesNoDecision(t *testing.T) {
	requireLeasePolicy(t)
	ns := newAgentNamespace(t, "lease-refused-", "agent-0", "agent-1")
	trusted, _ := publish(t, testenv.Keyring(t, 1), ns.name)
	sock := startSidecar(t, ns, "agent-0", ns.pods["agent-1"], trusted)
	c := unixClient(sock)
	testenv.Eventually(t, "the sidecar is ready and has tried its Lease", func() (bool, string) {
		resp, err := c.Get("http://sidecar/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		m := get(t, sock, "/metrics")
		return resp.StatusCode == http.StatusOK && strings.Contains(m, `toolgate_sidecar_lease_writes_total{result="error"}`),
			fmt.Sprintf("readyz %d, %s", resp.StatusCode, grep(m, "lease_writes"))
	})
	resp, err := c.Post("http://sidecar/v1/evaluate", "application/json", strings.NewReader(`{"tool_name":"Bash","agent_id":"bot"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"decision":"allow"`) {
		t.Errorf("with its Lease refused the sidecar decides %s, want allow", body)
	}
	if m := get(t, sock, "/metrics"); strings.Contains(m, `toolgate_sidecar_lease_writes_total{result="created"}`) {
		t.Errorf("a refused Lease counted as written:\n%s", grep(m, "lease_writes"))
	}
	var l coordinationv1.Lease
	if err := admin.Get(ctx(t), client.ObjectKey{Namespace: ns.name, Name: "agent-1"}, &l); !apierrors.IsNotFound(err) {
		t.Errorf("agent-1's Lease, written with agent-0's token: %v (%v)", err, l.Annotations)
	}
}

// TestSidecarLeaseSurvivesOtherWrites: the sidecar updates its Lease from
// the copy it last wrote; when someone else wrote it since (another holder
// of the Pod's token: a conflict) or the garbage collector deleted it, the
// next renewal reads it again (or creates it) and puts back what the
// sidecar serves, without a failed write.
func TestSidecarLeaseSurvivesOtherWrites(t *testing.T) {
	requireLeasePolicy(t)
	ns := newAgentNamespace(t, "lease-others-", "agent-0")
	trusted, rev := publish(t, testenv.Keyring(t, 1), ns.name)
	sock := startSidecar(t, ns, "agent-0", ns.pods["agent-0"], trusted)
	leases := leasesAs(t, ns.podToken(t, "agent-0"), ns.name)
	serving := func(what string) {
		t.Helper()
		testenv.EventuallyWithin(t, 30*time.Second, 200*time.Millisecond, what, func() (bool, string) {
			l, err := leases.Get(ctx(t), "agent-0", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got := l.Annotations[v1alpha1.AnnotationLeaseRevision]
			return got == rev, "revision " + got
		})
	}
	serving("the Lease names the revision served")

	l, err := leases.Get(ctx(t), "agent-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Annotations[v1alpha1.AnnotationLeaseRevision] = "written-by-another"
	if _, err := leases.Update(ctx(t), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	serving("after another writer, the renewal puts back the revision served")

	gcCfg := *cfg
	gcCfg.Impersonate.UserName = "system:serviceaccount:kube-system:generic-garbage-collector"
	gcCfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:authenticated"}
	gc, err := kubernetes.NewForConfig(&gcCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.CoordinationV1().Leases(ns.name).Delete(ctx(t), "agent-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	serving("after a delete, the renewal creates it again")
	m := get(t, sock, "/metrics")
	if strings.Contains(m, `toolgate_sidecar_lease_writes_total{result="error"}`) || !strings.Contains(m, `toolgate_sidecar_lease_writes_total{result="created"} 2`) {
		t.Errorf("writes: %s, want two creates and no error", grep(m, "lease_writes_total"))
	}
}
