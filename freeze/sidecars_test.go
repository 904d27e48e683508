package freeze

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

// sidecarPods creates injected-labelled Pods in the watched namespace (no
// kubelet runs them) and removes them, and their Leases, after the test.
func sidecarPods(t *testing.T, names ...string) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for _, name := range names {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: name, Labels: map[string]string{v1alpha1.LabelInjected: "true"}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}
		if err := k8sClient.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	t.Cleanup(func() {
		for _, p := range pods {
			for _, o := range []client.Object{p, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: p.Name}}} {
				if err := k8sClient.Delete(context.Background(), o, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("cleaning up %s: %v", p.Name, err)
				}
			}
		}
	})
	return pods
}

// reportFreezes writes pod's sidecar Lease as a sidecar applying the
// freezes named (FreezeName).
func reportFreezes(t *testing.T, pod *corev1.Pod, frozen ...string) {
	t.Helper()
	ctx := context.Background()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	err := k8sClient.Get(ctx, client.ObjectKeyFromObject(l), l)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	l.Labels = map[string]string{v1alpha1.LabelSidecar: "true"}
	l.Annotations = v1alpha1.NewSidecarReport("a-revision-the-operator-never-published", frozen, "test").Annotations()
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	l.Spec.LeaseDurationSeconds = ptr.To(int32(v1alpha1.SidecarLeaseDurationSeconds))
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if apierrors.IsNotFound(err) {
		err = k8sClient.Create(ctx, l)
	} else {
		err = k8sClient.Update(ctx, l)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The default wait returns once the operator reads every sidecar's Lease
// applying the freeze, and says how long that took.
func TestFreezeWaitsForEverySidecar(t *testing.T) {
	removeAfter(t, watched, "freeze-sidecar-waiter", "freeze-half-waiter", "freeze-operator-waiter", "freeze-no-waiter")
	pods := sidecarPods(t, "agent-a", "agent-b")
	for _, p := range pods {
		reportFreezes(t, p)
	}
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := toolgate(t, "freeze", "sidecar-waiter", "-n", watched, "--kubeconfig", kubeconfig, "--wait")
		done <- result{code, out}
	}()
	// The sidecars take the freeze up once it exists, as their
	// FrozenAgent watch would; the command must still be waiting then.
	testenv.Eventually(t, "the FrozenAgent published", func() (bool, string) {
		var fa v1alpha1.FrozenAgent
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: watched, Name: "freeze-sidecar-waiter"}, &fa); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(fa.Status.Conditions, v1alpha1.ConditionReady), "not Ready"
	})
	select {
	case r := <-done:
		t.Fatalf("freeze returned before any sidecar applied the freeze: exit %d\n%s", r.code, r.out)
	default:
	}
	name := v1alpha1.FreezeName("FrozenAgent", "freeze-sidecar-waiter")
	reportFreezes(t, pods[0], name)
	reportFreezes(t, pods[1], name)
	r := <-done
	if r.code != 0 || !regexp.MustCompile(`sidecar-waiter is frozen in agents: applied by 2/2 sidecars in [0-9.]+m?s \(live in bundle sha256:[0-9a-f]{64}\)`).MatchString(r.out) {
		t.Fatalf("freeze: exit %d\n%s", r.code, r.out)
	}
	t.Logf("toolgate freeze said: %s", strings.TrimSpace(r.out))

	// One sidecar of two applies it: the timeout says how many, and names
	// the other.
	half := v1alpha1.FreezeName("FrozenAgent", "freeze-half-waiter")
	reportFreezes(t, pods[0], name, half)
	code, out := toolgate(t, "freeze", "half-waiter", "-n", watched, "--kubeconfig", kubeconfig, "--timeout", "3s")
	if code != 1 || !strings.Contains(out, "live but not confirmed applied by every sidecar after 3s") ||
		!strings.Contains(out, "applied by 1/2 sidecars") || !strings.Contains(out, "Pod agent-b") {
		t.Fatalf("freeze applied by one sidecar of two: exit %d\n%s", code, out)
	}

	// --wait=operator: today's confirmation, the bundle alone.
	code, out = toolgate(t, "freeze", "operator-waiter", "-n", watched, "--kubeconfig", kubeconfig, "--wait=operator", "--timeout", "30s")
	if code != 0 || !regexp.MustCompile(`operator-waiter is frozen in agents: the operator confirmed it live in bundle sha256:[0-9a-f]{64} after \d+ ms\n`).MatchString(out) {
		t.Fatalf("--wait=operator: exit %d\n%s", code, out)
	}
	// --wait=none: created, nothing waited for.
	code, out = toolgate(t, "freeze", "no-waiter", "-n", watched, "--kubeconfig", kubeconfig, "--wait=none")
	if code != 0 || !strings.Contains(out, "created") || strings.Contains(out, "frozen in") {
		t.Fatalf("--wait=none: exit %d\n%s", code, out)
	}
}

func TestFreezeRefusesAnUnknownWaitMode(t *testing.T) {
	for _, args := range [][]string{
		{"freeze", "x", "-n", watched, "--wait=x"},
		{"freeze", "-A", "x", "--wait=sidecar"},
		{"freeze", "x", "-n", watched, "--wait="},
	} {
		code, out := toolgate(t, append(args, "--kubeconfig", kubeconfig)...)
		if code != 2 || !strings.Contains(out, "is not a wait mode: want sidecars") || !strings.Contains(out, "operator") || !strings.Contains(out, "none") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
}

func TestWaitModeReadsOldBooleans(t *testing.T) {
	for in, want := range map[string]waitMode{"sidecars": waitSidecars, "true": waitSidecars, "operator": waitOperator, "none": waitNone, "false": waitNone} {
		var m waitMode
		if err := m.Set(in); err != nil || m != want {
			t.Errorf("--wait=%s: %q, %v; want %q", in, m, err, want)
		}
	}
	for _, in := range []string{"", "yes", "1", "Sidecars", "operator "} {
		var m waitMode
		if err := m.Set(in); err == nil {
			t.Errorf("--wait=%q accepted as %q", in, m)
		}
	}
}
