//go:build cluster

package cluster

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

// The sidecars' own word in status (issue 29), in a namespace of its own so
// that the counts are the pair's alone: two injected agent Pods report
// through their Leases, a Policy change is Enforced 2/2, a sidecar that does
// not trust the operator's key turns it Enforced=False naming its Pod, and
// toolgate freeze returns once both sidecars apply the freeze.
const (
	confirmNS     = "agents-confirm"
	confirmDepl   = "pair"
	confirmPolicy = "bash-no-rm-rf"
	refuserPod    = "refuser"
)

// freezeApplied is what toolgate freeze prints once the operator reports
// both sidecars applying the freeze: the count and how long it took.
var freezeApplied = regexp.MustCompile(`applied by 2/2 sidecars in [0-9.]+(ns|µs|ms|s|m[0-9.]*s)\b`)

func sidecarsConfirm(t *testing.T) {
	requireInstalled(t)
	c := ctx(t)
	mustKubectl(t, "create", "namespace", confirmNS)
	defer deleteConfirmNamespace(t)
	defer confirmDiagnostics(t)
	mustKubectl(t, "create", "serviceaccount", "-n", confirmNS, agentSA)
	kubectlAdmitted(t, "", "apply", "-n", confirmNS, "-f", filepath.Join(testenv.RepoRoot(), "config", "samples", "policy_bash_no_rm_rf.yaml"))
	mustKubectl(t, "wait", "-n", confirmNS, "--for=condition=Ready", "policy/"+confirmPolicy, "--timeout=60s")

	started := time.Now()
	if err := node.Client.Create(c, pairDeployment()); err != nil {
		t.Fatal(err)
	}
	pods := readyPairPods(t)
	logDuration(t, "Deployment pair (2 replicas) created -> both Pods Ready", time.Since(started))
	pairLeases(t, pods)
	logDuration(t, "Deployment pair created -> both sidecars' Leases, owned by their Pods", time.Since(started))

	// A Policy change reaches Enforced=True 2/2.
	started = time.Now()
	kubectlAdmitted(t, "", "patch", "policy", "-n", confirmNS, confirmPolicy, "--type=merge", "-p", `{"spec":{"priority":7}}`)
	gen := policyGeneration(t)
	revision := publishedRevision(t, gen)
	logDuration(t, "Policy patched -> Ready, its generation published", time.Since(started))
	leasesReport(t, revision)
	logDuration(t, "Policy patched -> both sidecars' Leases report the new revision", time.Since(started))
	waitEnforced(t, gen, metav1.ConditionTrue, v1alpha1.ReasonAllSidecarsCurrent, "2/2", "")
	took := time.Since(started)
	logDuration(t, "Policy patched -> Enforced=True AllSidecarsCurrent 2/2", took)
	if took > 10*time.Second {
		// Seen once per few runs before the status pass came back after
		// its own writes (30 s: a Lease's duration); not yet explained on
		// a real node, so logged loudly rather than failed: the criterion
		// is that Enforced reaches 2/2, which waitEnforced bounds at 90 s.
		t.Logf("SLOW: Enforced took %v once both Leases reported the revision", took)
	}

	// A sidecar that does not trust the operator's key refuses the bundle.
	started = time.Now()
	if err := node.Client.Create(c, refusingSidecarPod(t)); err != nil {
		t.Fatal(err)
	}
	waitEnforced(t, gen, metav1.ConditionFalse, v1alpha1.ReasonSidecarRefusing, "2/3", "Pod "+refuserPod+" refused")
	logDuration(t, "refusing sidecar Pod created -> Policy Enforced=False SidecarRefusing 2/3 naming it", time.Since(started))
	started = time.Now()
	// A graceful delete: the Pod object goes only once kubelet has stopped
	// its sidecar. A forced one (grace 0) removes the object at once while
	// the process still runs, and that sidecar re-creates its Lease after
	// the garbage collector deleted it: a Pod the operator does not cache
	// (not injected) then counts as a live sidecar until that Lease
	// expires or is collected again.
	if err := node.Client.Delete(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: confirmNS, Name: refuserPod}}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 60*time.Second, poll, "the refusing Pod and its Lease gone", func() (bool, string) {
		podErr := node.Client.Get(c, client.ObjectKey{Namespace: confirmNS, Name: refuserPod}, &corev1.Pod{})
		leaseErr := node.Client.Get(c, client.ObjectKey{Namespace: confirmNS, Name: refuserPod}, &coordinationv1.Lease{})
		return apierrors.IsNotFound(podErr) && apierrors.IsNotFound(leaseErr), fmt.Sprintf("pod: %v, lease: %v", podErr, leaseErr)
	})
	waitEnforced(t, gen, metav1.ConditionTrue, v1alpha1.ReasonAllSidecarsCurrent, "2/2", "")
	logDuration(t, "refusing sidecar Pod deleted -> Policy Enforced=True 2/2 again", time.Since(started))

	// toolgate freeze waits for both sidecars and says how long they took.
	started = time.Now()
	cmd := exec.Command(filepath.Join(imagesDir, "toolgate"), "freeze", agentSA, "-n", confirmNS,
		"--reason", "cluster suite: confirmed by both sidecars", "--timeout", "60s")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	out, err := cmd.CombinedOutput()
	took = time.Since(started)
	if err != nil {
		t.Fatalf("toolgate freeze: %v\n%s", err, out)
	}
	t.Logf("toolgate freeze: %s", strings.TrimSpace(string(out)))
	logDuration(t, "toolgate freeze (creates the FrozenAgent, waits for both sidecars) -> returned", took)
	if !freezeApplied.Match(out) {
		t.Errorf("toolgate freeze did not print both sidecars and the time (want %s): %s", freezeApplied, out)
	}
	frozenApplied(t, started)
}

// pairDeployment is the agent Deployment of two injected replicas, the
// agent without the API token, as TestAgentDeployment's.
func pairDeployment() *appsv1.Deployment {
	f, two := false, int32(2)
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: confirmDepl, Namespace: confirmNS},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": confirmDepl}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": confirmDepl}, Annotations: map[string]string{v1alpha1.AnnotationInject: "true"}},
				Spec: corev1.PodSpec{ServiceAccountName: agentSA, AutomountServiceAccountToken: &f, TerminationGracePeriodSeconds: new(int64(2)),
					Containers: []corev1.Container{{Name: "agent", Image: agentRef, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"}}}}}}}
}

// readyPairPods waits for both of the pair's Pods to be Ready, and returns
// their UIDs by name.
func readyPairPods(t *testing.T) map[string]string {
	t.Helper()
	pods := map[string]string{}
	testenv.EventuallyWithin(t, 120*time.Second, poll, "both agent Pods Ready", func() (bool, string) {
		list, err := node.Clientset.CoreV1().Pods(confirmNS).List(ctx(t), metav1.ListOptions{LabelSelector: "app=" + confirmDepl})
		if err != nil {
			return false, err.Error()
		}
		clear(pods)
		for _, p := range list.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					pods[p.Name] = string(p.UID)
				}
			}
		}
		return len(pods) == 2 && len(list.Items) == 2, fmt.Sprintf("%d of %d Pods Ready", len(pods), len(list.Items))
	})
	return pods
}

// pairLeases waits for each sidecar's Lease: labelled, named after its Pod
// and owned by it (its UID), and none other.
func pairLeases(t *testing.T, pods map[string]string) {
	t.Helper()
	testenv.EventuallyWithin(t, 60*time.Second, poll, "both sidecars' Leases", func() (bool, string) {
		leases, err := node.Clientset.CoordinationV1().Leases(confirmNS).List(ctx(t), metav1.ListOptions{LabelSelector: v1alpha1.LabelSidecar})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, l := range leases.Items {
			refs := l.OwnerReferences
			if len(refs) != 1 || refs[0].APIVersion != "v1" || refs[0].Kind != "Pod" || refs[0].Name != l.Name || string(refs[0].UID) != pods[l.Name] {
				return false, fmt.Sprintf("Lease %s owned by %+v; Pods %v", l.Name, refs, pods)
			}
			names = append(names, l.Name)
		}
		return len(names) == len(pods), fmt.Sprintf("Leases %v, Pods %v", names, pods)
	})
}

func policyGeneration(t *testing.T) int64 {
	t.Helper()
	var p v1alpha1.Policy
	if err := node.Client.Get(ctx(t), client.ObjectKey{Namespace: confirmNS, Name: confirmPolicy}, &p); err != nil {
		t.Fatal(err)
	}
	return p.Generation
}

// publishedRevision waits for the Policy to be Ready at generation gen and
// returns the bundle revision that carries it.
func publishedRevision(t *testing.T, gen int64) string {
	t.Helper()
	var revision string
	testenv.EventuallyWithin(t, 60*time.Second, poll, fmt.Sprintf("Policy %s Ready at generation %d", confirmPolicy, gen), func() (bool, string) {
		var p v1alpha1.Policy
		if err := node.Client.Get(ctx(t), client.ObjectKey{Namespace: confirmNS, Name: confirmPolicy}, &p); err != nil {
			return false, err.Error()
		}
		r := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if r == nil || r.Status != metav1.ConditionTrue || r.ObservedGeneration != gen {
			return false, fmt.Sprintf("Ready %+v", r)
		}
		revision = p.Status.BundleRevision
		return revision != "", "no bundle revision"
	})
	return revision
}

// leasesReport waits for every sidecar Lease of the namespace to report
// serving revision.
func leasesReport(t *testing.T, revision string) {
	t.Helper()
	testenv.EventuallyWithin(t, 60*time.Second, poll, "both Leases report revision "+revision, func() (bool, string) {
		leases, err := node.Clientset.CoordinationV1().Leases(confirmNS).List(ctx(t), metav1.ListOptions{LabelSelector: v1alpha1.LabelSidecar})
		if err != nil {
			return false, err.Error()
		}
		var serving []string
		for _, l := range leases.Items {
			if l.Annotations[v1alpha1.AnnotationLeaseRevision] == revision {
				serving = append(serving, l.Name)
			}
		}
		return len(serving) == 2 && len(leases.Items) == 2, fmt.Sprintf("%d Leases, %v report it", len(leases.Items), serving)
	})
	var p v1alpha1.Policy
	if err := node.Client.Get(ctx(t), client.ObjectKey{Namespace: confirmNS, Name: confirmPolicy}, &p); err == nil {
		t.Logf("when both Leases reported %s: Policy status %+v", revision, p.Status)
	}
}

// waitEnforced waits for the Policy's Enforced condition to be for
// generation gen, with status and reason, its summary to be summary, and
// its message to contain names (when set).
func waitEnforced(t *testing.T, gen int64, status metav1.ConditionStatus, reason, summary, names string) {
	t.Helper()
	testenv.EventuallyWithin(t, 90*time.Second, poll, fmt.Sprintf("Policy %s Enforced=%s %s %s", confirmPolicy, status, reason, summary), func() (bool, string) {
		var p v1alpha1.Policy
		if err := node.Client.Get(ctx(t), client.ObjectKey{Namespace: confirmNS, Name: confirmPolicy}, &p); err != nil {
			return false, err.Error()
		}
		e := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionEnforced)
		if e == nil || p.Status.Enforcement == nil {
			return false, fmt.Sprintf("no Enforced condition yet: %+v", p.Status)
		}
		ok := e.ObservedGeneration == gen && e.Status == status && e.Reason == reason && p.Status.Enforcement.Summary == summary &&
			strings.Contains(e.Message, names)
		return ok, fmt.Sprintf("generation %d: %s %s %q, %+v", e.ObservedGeneration, e.Status, e.Reason, e.Message, *p.Status.Enforcement)
	})
}

// refusingSidecarPod is a Pod running the toolgate sidecar by hand, not
// injected, as the injector runs it (the agent's ServiceAccount, which the
// injector bound to the sidecar Role, and its Pod's name and UID from the
// downward API for the Lease), but trusting only a key the operator does
// not sign with: it refuses every bundle of the namespace.
func refusingSidecarPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: refuserPod, Namespace: confirmNS},
		Spec: corev1.PodSpec{ServiceAccountName: agentSA, TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "toolgate", Image: toolgateRef, ImagePullPolicy: corev1.PullNever,
				Args: []string{"sidecar", "--configmap=" + confirmNS + "/" + bundleName, "--trusted-keys-pem=" + keyPEM,
					"--listen=127.0.0.1:8181", "--lease-pod=$(POD_NAME)", "--lease-pod-uid=$(POD_UID)"},
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
				}}}}}
}

// frozenApplied checks what toolgate freeze waited for: the one
// FrozenAgent is Enforced 2/2, and each sidecar's Lease shows it applied as
// the operator counts it: named (the sidecar's own FrozenAgent watch) or
// serving the bundle revision it is live in (whichever path came first:
// on a real node the bundle has been seen first by ~50 ms). Then both
// Leases name it, the path that works without the operator.
func frozenApplied(t *testing.T, started time.Time) {
	t.Helper()
	c := ctx(t)
	var fa v1alpha1.FrozenAgentList
	if err := node.Client.List(c, &fa, client.InNamespace(confirmNS)); err != nil || len(fa.Items) != 1 {
		t.Fatalf("FrozenAgents in %s: %d (%v), want the one toolgate freeze created", confirmNS, len(fa.Items), err)
	}
	f := fa.Items[0]
	e := apimeta.FindStatusCondition(f.Status.Conditions, v1alpha1.ConditionEnforced)
	if e == nil || e.Status != metav1.ConditionTrue || e.Reason != v1alpha1.ReasonAllSidecarsCurrent || e.ObservedGeneration != f.Generation ||
		f.Status.Enforcement == nil || f.Status.Enforcement.Summary != "2/2" || f.Status.BundleRevision == "" {
		t.Fatalf("toolgate freeze returned before FrozenAgent %s is Enforced 2/2: %+v", f.Name, f.Status)
	}
	want := v1alpha1.FreezeName("FrozenAgent", f.Name)
	reports := func() (map[string]v1alpha1.SidecarReport, error) {
		leases, err := node.Clientset.CoordinationV1().Leases(confirmNS).List(c, metav1.ListOptions{LabelSelector: v1alpha1.LabelSidecar})
		if err != nil {
			return nil, err
		}
		m := map[string]v1alpha1.SidecarReport{}
		for _, l := range leases.Items {
			r, err := v1alpha1.ParseSidecarReport(l.Annotations)
			if err != nil {
				return nil, fmt.Errorf("Lease %s: %w", l.Name, err)
			}
			m[l.Name] = r
		}
		return m, nil
	}
	got, err := reports()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("%d sidecar Leases after the freeze, want the pair's 2", len(got))
	}
	for name, r := range got {
		if !r.Applies(want, "") && r.Revision != f.Status.BundleRevision {
			t.Errorf("Lease %s neither names %s nor serves its revision %s: %+v", name, want, f.Status.BundleRevision, r)
		}
	}
	testenv.EventuallyWithin(t, 30*time.Second, poll, "both Leases name "+want, func() (bool, string) {
		got, err := reports()
		if err != nil {
			return false, err.Error()
		}
		var naming []string
		for name, r := range got {
			if r.Applies(want, "") {
				naming = append(naming, name)
			}
		}
		return len(naming) == 2 && len(got) == 2, fmt.Sprintf("%d Leases, %v name it", len(got), naming)
	})
	logDuration(t, "toolgate freeze started -> both Leases name "+want+" (each sidecar's own FrozenAgent watch)", time.Since(started))
}

// confirmDiagnostics shows, when the test failed, what the sidecars and
// the operator said: the Leases, the Policy's status and the refuser's log.
func confirmDiagnostics(t *testing.T) {
	if !t.Failed() {
		return
	}
	for _, args := range [][]string{
		{"get", "pods,leases", "-n", confirmNS, "-o", "wide"},
		{"get", "leases", "-n", confirmNS, "-l", v1alpha1.LabelSidecar, "-o", "yaml"},
		{"get", "policy,frozenagent", "-n", confirmNS, "-o", "yaml"},
		{"logs", "-n", confirmNS, refuserPod, "--tail=40"},
		{"logs", "-n", confirmNS, "-l", "app=" + confirmDepl, "-c", webhook.SidecarName, "--tail=40", "--prefix"},
	} {
		out, err := kubectl(args...)
		t.Logf("kubectl %s (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

// deleteConfirmNamespace deletes the namespace and waits for it to go, so
// that the tests after this one count only their own Pods.
func deleteConfirmNamespace(t *testing.T) {
	started := time.Now()
	if out, err := kubectl("delete", "namespace", confirmNS, "--timeout=120s"); err != nil {
		t.Errorf("deleting namespace %s: %v\n%s", confirmNS, err, out)
		return
	}
	logDuration(t, "namespace "+confirmNS+" deleted", time.Since(started))
}
