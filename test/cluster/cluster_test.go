//go:build cluster

package cluster

// The users' path, in order: each test builds on the ones before it (the
// release installed, the Policies applied, the agent running), as a user
// would; go test runs a file's tests in source order.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/endpoint"
	"github.com/toolgate/toolgate/internal/ociimage"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

const (
	release    = "toolgate"
	releaseNS  = "toolgate-system"
	agentsNS   = "agents"
	enforceNS  = "agents-enforce"
	manager    = "toolgate-manager"
	agentSA    = "coder"
	agentDepl  = "coder"
	bundleName = "toolgate-bundle"
)

var installArgs = []string{"--set", "image.repository=" + toolgateRepo, "--set", "image.tag=" + toolgateTag,
	"--set", "image.pullPolicy=Never", "--set", "sidecarInjection.image.pullPolicy=Never"}

// TestImportedImageIsTheDockerfilesFinalStage reads the toolgate image's
// config back from the node's containerd and compares its entrypoint and
// user with the Dockerfile's final stage.
func TestImportedImageIsTheDockerfilesFinalStage(t *testing.T) {
	wantEntrypoint, wantUser := dockerfileFinalStage(t)
	out, err := node.Ctr("images", "ls")
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, out)
	}
	var manifest string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == toolgateRef {
			manifest = f[2]
		}
	}
	if manifest == "" {
		t.Fatalf("%s is not in containerd:\n%s", toolgateRef, out)
	}
	var m struct{ Config struct{ Digest string } }
	if b, err := node.Ctr("content", "get", manifest); err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("ctr content get %s: %v\n%s", manifest, err, b)
	}
	var cfg ociimage.Config
	if b, err := node.Ctr("content", "get", m.Config.Digest); err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("ctr content get %s: %v\n%s", m.Config.Digest, err, b)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != strings.Join(wantEntrypoint, " ") {
		t.Errorf("imported image's entrypoint %q, the Dockerfile's %q", cfg.Config.Entrypoint, wantEntrypoint)
	}
	if cfg.Config.User != wantUser {
		t.Errorf("imported image's user %q, the Dockerfile's %q", cfg.Config.User, wantUser)
	}
	if wantEntrypoint[0] != webhook.SidecarBinary {
		t.Errorf("the Dockerfile's entrypoint %q is not where the injector's probes call toolgate (%s)", wantEntrypoint, webhook.SidecarBinary)
	}
}

// dockerfileFinalStage parses ENTRYPOINT (exec form) and USER of the
// Dockerfile's last stage.
func dockerfileFinalStage(t *testing.T) ([]string, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var entrypoint []string
	user := ""
	for _, line := range strings.Split(string(b), "\n") {
		cmd, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.ToUpper(cmd) {
		case "FROM":
			entrypoint, user = nil, ""
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(args), &entrypoint); err != nil {
				t.Fatalf("Dockerfile ENTRYPOINT %s is not the exec form: %v", args, err)
			}
		case "USER":
			user = strings.TrimSpace(args)
		}
	}
	if len(entrypoint) == 0 || user == "" {
		t.Fatalf("the Dockerfile's final stage has no ENTRYPOINT or USER")
	}
	return entrypoint, user
}

// 1. helm install: the managers become Ready (leader election, probes,
// certificates created and injected) and both webhooks answer through
// their Service.
func TestHelmInstall(t *testing.T) {
	started := time.Now()
	out, err := helm.Run(append([]string{"install", release, chart, "-n", releaseNS, "--create-namespace", "--wait", "--timeout", "4m"}, installArgs...)...)
	if err != nil {
		pods, _ := kubectl("get", "pods", "-A", "-o", "wide")
		desc, _ := kubectl("describe", "pods", "-n", releaseNS)
		t.Fatalf("helm install: %v\n%s\n%s\n%s\nkubelet:\n%s", err, out, pods, desc, node.LogTail("kubelet", 3000))
	}
	logDuration(t, "helm install --wait (2 manager replicas Ready)", time.Since(started))
	c := ctx(t)
	d, err := node.Clientset.AppsV1().Deployments(releaseNS).Get(c, manager, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.ReadyReplicas != 2 || d.Status.AvailableReplicas != 2 {
		t.Fatalf("manager: %d ready, %d available; want 2", d.Status.ReadyReplicas, d.Status.AvailableReplicas)
	}
	pods, err := node.Clientset.CoreV1().Pods(releaseNS).List(c, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=manager"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image != toolgateRef {
			t.Errorf("manager Pod %s runs %s, want the local image %s", p.Name, p.Spec.Containers[0].Image, toolgateRef)
		}
	}
	// Leader election: one of the Pods holds a Lease in the release namespace.
	testenv.EventuallyWithin(t, 60*time.Second, poll, "a manager holds the leader Lease", func() (bool, string) {
		leases, err := node.Clientset.CoordinationV1().Leases(releaseNS).List(c, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity != nil {
				for _, p := range pods.Items {
					if strings.HasPrefix(*l.Spec.HolderIdentity, p.Name) {
						return true, ""
					}
				}
			}
		}
		return false, fmt.Sprintf("%d leases, none held by a manager Pod", len(leases.Items))
	})
	// The certificates: created by the manager, the CA injected into both
	// webhook configurations.
	testenv.EventuallyWithin(t, 60*time.Second, poll, "webhook CA bundles injected", func() (bool, string) {
		v, err := node.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(c, release+"-validating-webhook", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		m, err := node.Clientset.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(c, release+"-mutating-webhook", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(v.Webhooks[0].ClientConfig.CABundle) == 0 || len(m.Webhooks[0].ClientConfig.CABundle) == 0 {
			return false, "empty caBundle"
		}
		if v.Webhooks[0].ClientConfig.Service == nil || m.Webhooks[0].ClientConfig.Service == nil {
			return false, "a webhook is not called through its Service"
		}
		return true, ""
	})
	mustKubectl(t, "create", "namespace", agentsNS)
	mustKubectl(t, "create", "serviceaccount", "-n", agentsNS, agentSA)
	// The validating webhook answers through the Service: a bad regex is
	// refused by it, with the engine's compile error (the CRD schema cannot
	// compile a pattern).
	testenv.EventuallyWithin(t, 60*time.Second, poll, "the Policy webhook refuses a bad regex", func() (bool, string) {
		out, err := kubectlStdin(badPolicy("probe-bad-regex"), "apply", "--dry-run=server", "-n", agentsNS, "-f", "-")
		if err == nil {
			return false, "accepted: " + out
		}
		if !strings.Contains(out, webhookRefusal) {
			return false, out
		}
		return true, ""
	})
	// The mutating webhook answers through the Service: a dry run of an
	// annotated Pod comes back with the sidecar.
	testenv.EventuallyWithin(t, 60*time.Second, poll, "the injector answers", func() (bool, string) {
		pod := agentPod("probe-inject", true)
		if err := node.Client.Create(c, pod, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		if len(pod.Spec.InitContainers) == 0 || pod.Spec.InitContainers[0].Name != webhook.SidecarName {
			return false, "no sidecar injected"
		}
		return true, ""
	})
}

// webhookRefusal is in the validating webhook's answer to badPolicy: the
// engine's compile error.
const webhookRefusal = `pattern "([unclosed" does not compile`

func badPolicy(name string) string {
	return fmt.Sprintf(`apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: %s}
spec:
  rules:
  - id: bad
    effect: deny
    conditions:
    - {field: input.command, operator: matches, value: "([unclosed"}
`, name)
}

// agentPod is an agent Pod running the test agent as ServiceAccount
// coder, without the API token (only the sidecar gets one).
func agentPod(name string, inject bool) *corev1.Pod {
	f := false
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agentsNS},
		Spec: corev1.PodSpec{ServiceAccountName: agentSA, AutomountServiceAccountToken: &f, TerminationGracePeriodSeconds: new(int64(2)),
			Containers: []corev1.Container{{Name: "agent", Image: agentRef, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"}}}}}
	if inject {
		p.Annotations = map[string]string{v1alpha1.AnnotationInject: "true"}
	}
	return p
}

// 2. kubectl apply Policies: Ready, and the bundle is published.
func TestPolicyReady(t *testing.T) {
	requireInstalled(t)
	for _, f := range []string{"policy_bash_no_rm_rf.yaml", "policy_default_deny_readonly.yaml"} {
		mustKubectl(t, "apply", "-n", agentsNS, "-f", filepath.Join(testenv.RepoRoot(), "config", "samples", f))
	}
	out := mustKubectl(t, "wait", "-n", agentsNS, "--for=condition=Ready", "policy/bash-no-rm-rf", "policy/default-deny-readonly", "--timeout=60s")
	t.Log(out)
	c := ctx(t)
	var p v1alpha1.Policy
	if err := node.Client.Get(c, client.ObjectKey{Namespace: agentsNS, Name: "bash-no-rm-rf"}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Status.BundleRevision == "" {
		t.Fatalf("Policy Ready without a bundle revision: %+v", p.Status)
	}
	cm, err := node.Clientset.CoreV1().ConfigMaps(agentsNS).Get(c, bundleName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bundle ConfigMap: %v", err)
	}
	if len(cm.Data)+len(cm.BinaryData) == 0 || cm.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue {
		t.Errorf("bundle ConfigMap: %d data keys, %d binary, labels %v", len(cm.Data), len(cm.BinaryData), cm.Labels)
	}
	if _, err := kubectlStdin(badPolicy("bad-regex"), "apply", "-n", agentsNS, "-f", "-"); err == nil {
		t.Error("a Policy with a bad regex was accepted")
	}
}

func requireInstalled(t *testing.T) {
	t.Helper()
	if _, err := node.Clientset.AppsV1().Deployments(releaseNS).Get(ctx(t), manager, metav1.GetOptions{}); err != nil {
		t.Fatalf("the release is not installed (an earlier test failed): %v", err)
	}
}

var agentPodName string

// 3. An annotated agent Deployment under the real kubelet: the native
// sidecar starts first, its exec probes pass, the agent gets the Policies'
// decisions over the socket and 127.0.0.1, and cannot read the sidecar's
// token.
func TestAgentDeployment(t *testing.T) {
	requireInstalled(t)
	c := ctx(t)
	f, one := false, int32(1)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: agentDepl, Namespace: agentsNS},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": agentDepl}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": agentDepl}, Annotations: map[string]string{v1alpha1.AnnotationInject: "true"}},
				Spec: corev1.PodSpec{ServiceAccountName: agentSA, AutomountServiceAccountToken: &f, TerminationGracePeriodSeconds: new(int64(2)),
					Containers: []corev1.Container{{Name: "agent", Image: agentRef, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"}}}}}}}
	started := time.Now()
	if err := node.Client.Create(c, d); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	testenv.EventuallyWithin(t, 120*time.Second, poll, "the agent Pod is Ready", func() (bool, string) {
		pods, err := node.Clientset.CoreV1().Pods(agentsNS).List(c, metav1.ListOptions{LabelSelector: "app=" + agentDepl})
		if err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprintf("%v pods, %v", len(pods.Items), err)
		}
		pod = pods.Items[0]
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, init %+v", pod.Status.Phase, pod.Status.InitContainerStatuses)
	})
	logDuration(t, "annotated agent Deployment created -> Pod Ready (sidecar injected, bundle loaded)", time.Since(started))
	agentPodName = pod.Name

	if pod.Labels[v1alpha1.LabelInjected] != "true" || len(pod.Spec.InitContainers) == 0 || pod.Spec.InitContainers[0].Name != webhook.SidecarName {
		t.Fatalf("no native sidecar injected: labels %v, init containers %d", pod.Labels, len(pod.Spec.InitContainers))
	}
	sc := pod.Spec.InitContainers[0]
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the sidecar is not a native sidecar (restartPolicy %v)", sc.RestartPolicy)
	}
	if sc.StartupProbe == nil || sc.StartupProbe.Exec == nil || sc.ReadinessProbe == nil || sc.ReadinessProbe.Exec == nil {
		t.Errorf("the sidecar has no exec startup/readiness probes")
	}
	ss, as := pod.Status.InitContainerStatuses[0], pod.Status.ContainerStatuses[0]
	if ss.Started == nil || !*ss.Started || !ss.Ready || ss.RestartCount != 0 || ss.State.Running == nil {
		t.Errorf("sidecar status: %+v", ss)
	}
	if !as.Ready || as.State.Running == nil {
		t.Fatalf("agent status: %+v", as)
	}
	// The kubelet started the agent only after the sidecar's startup probe
	// passed: its start is not before the sidecar's.
	if as.State.Running.StartedAt.Before(&ss.State.Running.StartedAt) {
		t.Errorf("the agent started at %v, before the sidecar (%v)", as.State.Running.StartedAt, ss.State.Running.StartedAt)
	}
	for _, via := range []string{"env", "http://127.0.0.1:8181"} {
		a, out, err := evaluateIn(agentsNS, pod.Name, "agent", via, request(t, "bash_rm_rf.json"))
		if err != nil || a.Decision != "deny" || a.MatchedRuleID != "no-rm-rf" {
			t.Errorf("rm -rf via %s: %v (%v) %s", via, a, err, out)
		}
		a, out, err = evaluateIn(agentsNS, pod.Name, "agent", via, request(t, "bash_ls.json"))
		if err != nil || a.Decision != "allow" || a.MatchedRuleID != "read-only-shell" {
			t.Errorf("ls via %s: %v (%v) %s", via, a, err, out)
		}
	}
	// TOOLGATE_URL is the socket: the "env" call above went over it.
	if url := envOf(pod.Spec.Containers[0], endpoint.EnvURL); url != "unix://"+endpoint.DefaultSocket {
		t.Errorf("the agent's %s is %q, want the socket", endpoint.EnvURL, url)
	}
	// The agent has no token; only the sidecar's container mounts one.
	if out, err := kubectl("exec", "-n", agentsNS, pod.Name, "-c", "agent", "--", agentBinary, "read", "/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
		t.Errorf("the agent read a service account token: %s", out)
	}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if strings.Contains(m.MountPath, "serviceaccount") {
			t.Errorf("the agent container mounts %s", m.MountPath)
		}
	}
}

func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// 4. A FrozenAgent: the running agent is denied AGENT_FROZEN within 1 s;
// deleting it allows it again.
func TestFreezeRunningAgent(t *testing.T) {
	if agentPodName == "" {
		t.Fatal("no running agent (TestAgentDeployment failed)")
	}
	freeze := fmt.Sprintf(`apiVersion: toolgate.dev/v1alpha1
kind: FrozenAgent
metadata: {name: freeze-coder, namespace: %s}
spec: {agentId: %s, reason: "cluster test: freeze on a real node"}
`, agentsNS, agentSA)
	d := watchUntil(t, "code", "AGENT_FROZEN", func() {
		if out, err := kubectlStdin(freeze, "apply", "-f", "-"); err != nil {
			t.Errorf("kubectl apply FrozenAgent: %v\n%s", err, out)
		}
	})
	logDuration(t, "kubectl apply FrozenAgent -> running agent denied AGENT_FROZEN", d)
	if d > time.Second {
		t.Errorf("freeze to deny took %v, want <= 1s", d)
	}
	d = watchUntil(t, "decision", "allow", func() {
		mustKubectl(t, "delete", "frozenagent", "-n", agentsNS, "freeze-coder")
	})
	logDuration(t, "kubectl delete FrozenAgent -> agent allowed again", d)
}

// watchUntil starts the agent asking the sidecar (over the socket) every
// 10 ms, runs action once the agent has its first answer, and returns how
// long after action started the answer's field became value.
func watchUntil(t *testing.T, field, value string, action func()) time.Duration {
	t.Helper()
	cmd := exec.Command(node.Bins.Kubectl, "exec", "-n", agentsNS, agentPodName, "-c", "agent", "--", agentBinary, "watch", "env", request(t, "bash_ls.json"), field, value)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// "watching": it has had an answer, so what follows times action alone.
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "watching" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the agent's watch did not start: %q", lines.Text())
	}
	started := time.Now()
	action()
	var at int64
	var rest []string
	for lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "at="); ok {
			at, _ = strconv.ParseInt(v, 10, 64)
		} else {
			rest = append(rest, lines.Text())
		}
	}
	if err := cmd.Wait(); err != nil || at == 0 {
		t.Fatalf("the agent never saw %s=%s: %v %s", field, value, err, rest)
	}
	// The Pod shares the machine's clock.
	return time.Unix(0, at).Sub(started)
}

// 5. The agent as a Job: it completes, the sidecar stops, the Job succeeds.
func TestAgentJob(t *testing.T) {
	requireInstalled(t)
	c := ctx(t)
	started := time.Now()
	if out, err := kubectlStdin(agentJob("coder-job", "job", request(t, "bash_ls.json")), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := kubectl("wait", "-n", agentsNS, "--for=condition=Complete", "job/coder-job", "--timeout=120s")
	if err != nil {
		desc, _ := kubectl("describe", "pods", "-n", agentsNS, "-l", "job-name=coder-job")
		t.Fatalf("the Job did not complete: %v\n%s\n%s", err, out, desc)
	}
	logDuration(t, "agent Job created -> Complete", time.Since(started))
	pods, err := node.Clientset.CoreV1().Pods(agentsNS).List(c, metav1.ListOptions{LabelSelector: "job-name=coder-job"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("job pods: %v %v", len(pods.Items), err)
	}
	p := pods.Items[0]
	if p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("job Pod phase %s", p.Status.Phase)
	}
	if len(p.Status.InitContainerStatuses) == 0 || p.Status.InitContainerStatuses[0].Name != webhook.SidecarName {
		t.Fatalf("the Job's Pod has no sidecar: %+v", p.Status.InitContainerStatuses)
	}
	testenv.EventuallyWithin(t, 30*time.Second, poll, "the Job's sidecar stopped", func() (bool, string) {
		got, err := node.Clientset.CoreV1().Pods(agentsNS).Get(c, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if s := got.Status.InitContainerStatuses[0]; s.State.Terminated == nil {
			return false, fmt.Sprintf("sidecar state %+v", s.State)
		}
		return true, ""
	})
	logs := mustKubectl(t, "logs", "-n", agentsNS, p.Name, "-c", "agent")
	var a answer
	if err := json.Unmarshal([]byte(logs), &a); err != nil || a.Decision != "allow" {
		t.Errorf("the Job's agent got %q", logs)
	}
}

// agentJob is a Job (no retries) of one annotated agent Pod, as
// ServiceAccount coder without its token, running the test agent with
// args.
func agentJob(name string, args ...string) string {
	quoted, err := json.Marshal(args) // JSON is YAML
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: %s}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {toolgate.dev/inject: "true"}
    spec:
      serviceAccountName: %s
      automountServiceAccountToken: false
      restartPolicy: Never
      terminationGracePeriodSeconds: 2
      containers:
      - name: agent
        image: %s
        imagePullPolicy: Never
        args: %s
`, name, agentsNS, agentSA, agentRef, quoted)
}

// 5b. An agent Job whose call an ask rule holds: an ApprovalRequest
// appears and the Job waits; the agent's own ServiceAccount cannot approve
// it; a person approves it with kubectl; the held call is allowed, the
// approval used, and the Job completes.
func TestAgentJobWaitsForApproval(t *testing.T) {
	requireInstalled(t)
	if out, err := kubectlStdin(wireTransferPolicy, "apply", "-n", agentsNS, "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Ready: the bundle asking for approvals is published before the Job's
	// sidecar loads one.
	mustKubectl(t, "wait", "-n", agentsNS, "--for=condition=Ready", "policy/wire-transfers", "--timeout=60s")
	const job = "payer-job"
	started := time.Now()
	if out, err := kubectlStdin(agentJob(job, "job", wireTransfer), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ar := pendingApproval(t, job)
	logDuration(t, "agent Job created -> its call's ApprovalRequest exists", time.Since(started))
	if ar.Spec.Tool != "wire_transfer" || ar.Spec.AgentID != agentSA || ar.Spec.ServiceAccount != agentSA ||
		ar.Spec.Policy != "wire-transfers" || ar.Spec.Rule != "large-transfer" || ar.Spec.Reason != wireTransferReason {
		t.Errorf("the ApprovalRequest does not describe the Job's call: %+v", ar.Spec)
	}
	requireHeld(t, job)

	// The agent's own ServiceAccount: the injector's Role lets it update
	// the status (for consumedAt), neither read nor patch it (kubectl patch
	// reads first), and the approvals admission policy refuses it a
	// decision, in its own name or in a person's.
	user := strings.TrimSpace(mustKubectl(t, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"))
	sa := "system:serviceaccount:" + agentsNS + ":" + agentSA
	if out, err := kubectl(approvePatch(ar.Name, sa, "--as="+sa)...); err == nil || !strings.Contains(out, refusedAsker) &&
		!(strings.Contains(out, `User "`+sa+`" cannot`) && strings.Contains(out, `resource "approvalrequests/status"`)) {
		t.Errorf("the agent's ServiceAccount patching an approval: %v, %q; want refused", err, out)
	}
	for _, attack := range []struct{ decidedBy, refusal string }{
		{sa, refusedAsker},
		{user, "status.decidedBy must be your own user name, " + sa},
	} {
		out, err := kubectlStdin(approvedBy(t, ar.Name, attack.decidedBy), "replace", "--subresource=status", "-f", "-", "--as="+sa)
		if err == nil || !strings.Contains(out, attack.refusal) {
			t.Errorf("the agent's ServiceAccount writing decidedBy %s: %v, %q; want refused with %q", attack.decidedBy, err, out, attack.refusal)
		}
	}
	if got := approvalRequest(t, ar.Name); got.Status.Decision != "" {
		t.Fatalf("the agent's ServiceAccount decided its own call: %+v", got.Status)
	}
	requireHeld(t, job)

	// A person approves, as they would type it.
	jobRV := jobResourceVersion(t, job)
	patched := time.Now()
	mustKubectl(t, approvePatch(ar.Name, user)...)
	logDuration(t, "kubectl patch approvalrequest --subresource=status (the process)", time.Since(patched))
	completed := jobCompleteAfter(t, job, jobRV)
	logDuration(t, "kubectl patch (Approved) -> the waiting agent Job Complete", completed.Sub(patched))

	answeredAt, line := agentAnswer(t, job)
	// The Pod shares the machine's clock.
	if answeredAt.Before(patched) {
		t.Errorf("the Job's agent had its answer %v before the approval", patched.Sub(answeredAt))
	}
	logDuration(t, "kubectl patch (Approved) -> the held call answered in the Job's agent (its log line's time)", answeredAt.Sub(patched))
	var a struct {
		answer
		Effect   string `json:"effect"`
		Approval struct {
			Name string `json:"name"`
		} `json:"approval"`
	}
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatalf("the Job's agent printed %q: %v", line, err)
	}
	if a.Decision != "allow" || a.Effect != "ask" || a.MatchedRuleID != "large-transfer" || a.Reason != "approved by "+user || a.Approval.Name != ar.Name {
		t.Errorf("the Job's agent got %s effect=%q approval=%q; want allow, effect ask, rule large-transfer, reason %q, approval %s", a.answer, a.Effect, a.Approval.Name, "approved by "+user, ar.Name)
	}
	// The approval is used: the sidecar recorded it, so it lets no second
	// call through.
	if got := approvalRequest(t, ar.Name); got.Status.Decision != v1alpha1.ApprovalApproved || got.Status.DecidedBy != user || got.Status.ConsumedAt == nil {
		t.Errorf("after the call: %+v; want Approved by %s and consumed", got.Status, user)
	}
}

// 6. Webhook outage: no manager. A new annotated Pod starts without a
// sidecar (failurePolicy Ignore) and its calls fail; in an enforce
// namespace it is refused; the running sidecar keeps serving its bundle.
func TestWebhookOutage(t *testing.T) {
	requireInstalled(t)
	c := ctx(t)
	mustKubectl(t, "scale", "deployment", "-n", releaseNS, manager, "--replicas=0")
	defer func() {
		mustKubectl(t, "scale", "deployment", "-n", releaseNS, manager, "--replicas=2")
		mustKubectl(t, "rollout", "status", "deployment", "-n", releaseNS, manager, "--timeout=180s")
	}()
	testenv.EventuallyWithin(t, 60*time.Second, poll, "no manager Pod left", func() (bool, string) {
		pods, err := node.Clientset.CoreV1().Pods(releaseNS).List(c, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=manager"})
		if err != nil || len(pods.Items) > 0 {
			return false, fmt.Sprintf("%d pods %v", len(pods.Items), err)
		}
		return true, ""
	})
	pod := agentPod("outage-agent", true)
	if err := node.Client.Create(c, pod); err != nil {
		t.Fatalf("an annotated Pod outside enforce namespaces was refused during the outage: %v", err)
	}
	if len(pod.Spec.InitContainers)+len(pod.Spec.Containers) != 1 {
		t.Fatalf("the Pod got containers without an injector: %+v %+v", pod.Spec.InitContainers, pod.Spec.Containers)
	}
	testenv.EventuallyWithin(t, 60*time.Second, poll, "the uninjected Pod runs", func() (bool, string) {
		got, err := node.Clientset.CoreV1().Pods(agentsNS).Get(c, pod.Name, metav1.GetOptions{})
		if err != nil || got.Status.Phase != corev1.PodRunning {
			return false, fmt.Sprintf("%v %v", got.Status.Phase, err)
		}
		return true, ""
	})
	// Its agent finds no sidecar: every call fails, nothing is allowed.
	if a, out, err := evaluateIn(agentsNS, pod.Name, "agent", "http://127.0.0.1:8181", request(t, "bash_ls.json")); err == nil {
		t.Errorf("an uninjected agent got a decision: %v %s", a, out)
	}
	// The running sidecar keeps serving the last bundle.
	if agentPodName != "" {
		a, out, err := evaluateIn(agentsNS, agentPodName, "agent", "env", request(t, "bash_rm_rf.json"))
		if err != nil || a.Decision != "deny" || a.MatchedRuleID != "no-rm-rf" {
			t.Errorf("the running sidecar during the outage: %v (%v) %s", a, err, out)
		}
	}
	// In an enforce namespace the same Pod is refused.
	mustKubectl(t, "create", "namespace", enforceNS)
	mustKubectl(t, "label", "namespace", enforceNS, "toolgate.dev/enforce=true")
	mustKubectl(t, "create", "serviceaccount", "-n", enforceNS, agentSA)
	enforced := agentPod("outage-enforced", true)
	enforced.Namespace = enforceNS
	testenv.EventuallyWithin(t, 30*time.Second, poll, "the enforce namespace refuses an uninjected Pod", func() (bool, string) {
		err := node.Client.Create(c, enforced.DeepCopy())
		if err == nil {
			_ = node.Client.Delete(c, enforced.DeepCopy())
			return false, "created"
		}
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			return false, err.Error()
		}
		return true, ""
	})
	_ = node.Client.Delete(c, pod)
}

// 7. The sidecars confirm what they serve (issue 29): a Policy change is
// Enforced 2/2 on two injected Pods, a sidecar refusing the bundle turns it
// Enforced=False naming its Pod, toolgate freeze returns once both apply the
// freeze (sidecars_confirm_test.go).
func TestSidecarsConfirm(t *testing.T) {
	sidecarsConfirm(t)
}

// 8. Shared limits (issue 30): the release counts limits with store:
// shared in a Redis running in the cluster; three replicas of one agent are
// allowed the limit once in total, not once each (shared_limits_test.go).
func TestSharedLimitAcrossReplicas(t *testing.T) {
	sharedLimitAcrossReplicas(t)
}

// 9. helm upgrade with changed values rolls the managers with no moment
// where a bad Policy gets in; helm uninstall keeps the CRDs (and the
// Policies) and removes the rest.
func TestHelmUpgradeAndUninstall(t *testing.T) {
	requireInstalled(t)
	c := ctx(t)
	before, err := node.Clientset.AppsV1().Deployments(releaseNS).Get(c, manager, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var accepted, refused, unavailable atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			out, err := kubectlStdin(badPolicy(fmt.Sprintf("upgrade-bad-%d", i)), "apply", "-n", agentsNS, "-f", "-")
			switch {
			case err == nil:
				accepted.Add(1)
				t.Errorf("during the upgrade a Policy with a bad regex was accepted: %s", out)
			case strings.Contains(out, webhookRefusal):
				refused.Add(1)
			default:
				// failurePolicy Fail: refused all the same.
				if unavailable.Add(1) == 1 {
					t.Logf("refused without the webhook's answer: %s", strings.TrimSpace(out))
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	started := time.Now()
	out, err := helm.Run(append([]string{"upgrade", release, chart, "-n", releaseNS, "--wait", "--timeout", "4m",
		"--set", "manager.logLevel=debug", "--set", "clusterName=upgraded"}, installArgs...)...)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	logDuration(t, "helm upgrade --wait (managers rolled)", time.Since(started))
	t.Logf("bad Policies during the upgrade: %d refused by the webhook, %d refused while it was unreachable, %d accepted", refused.Load(), unavailable.Load(), accepted.Load())
	after, err := node.Clientset.AppsV1().Deployments(releaseNS).Get(c, manager, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation == before.Generation || !strings.Contains(strings.Join(after.Spec.Template.Spec.Containers[0].Args, " "), "--cluster-name=upgraded") {
		t.Errorf("the upgrade did not roll the managers with the new values: %v", after.Spec.Template.Spec.Containers[0].Args)
	}
	if refused.Load() == 0 {
		t.Error("the webhook refused no bad Policy during the upgrade")
	}

	out, err = helm.Run("uninstall", release, "-n", releaseNS, "--wait", "--timeout", "2m")
	if err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	for _, crd := range []string{"policies.toolgate.dev", "frozenagents.toolgate.dev"} {
		if _, err := kubectl("get", "crd", crd); err != nil {
			t.Errorf("CRD %s removed on uninstall (crds.keep)", crd)
		}
	}
	var p v1alpha1.Policy
	if err := node.Client.Get(c, client.ObjectKey{Namespace: agentsNS, Name: "bash-no-rm-rf"}, &p); err != nil {
		t.Errorf("Policy gone after uninstall: %v", err)
	}
	// Everything else the chart installed is gone.
	dyn, err := dynamic.NewForConfig(node.Config)
	if err != nil {
		t.Fatal(err)
	}
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release}
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Version: "v1", Resource: "services"},
		{Version: "v1", Resource: "serviceaccounts"},
		{Version: "v1", Resource: "secrets"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
		{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	} {
		l, err := dyn.Resource(gvr).List(c, sel)
		if err != nil {
			t.Errorf("listing %s: %v", gvr.Resource, err)
			continue
		}
		for _, o := range l.Items {
			t.Errorf("left after uninstall: %s %s/%s", gvr.Resource, o.GetNamespace(), o.GetName())
		}
	}
	testenv.EventuallyWithin(t, 60*time.Second, poll, "the manager Pods are gone", func() (bool, string) {
		pods, err := node.Clientset.CoreV1().Pods(releaseNS).List(c, metav1.ListOptions{})
		if err != nil || len(pods.Items) > 0 {
			return false, fmt.Sprintf("%d pods %v", len(pods.Items), err)
		}
		return true, ""
	})
}
