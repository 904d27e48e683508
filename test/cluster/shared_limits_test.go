//go:build cluster

package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/internal/ociimage"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

// Shared limits on a real node (issue 30): a Redis Deployment in a
// namespace of its own, the release pointed at it (usage.redis.url and
// usage.redis.passwordSecret), three injected replicas of one agent and a
// Policy allowing 5 pay calls an hour in the namespace, counted in Redis:
// 12 calls spread over the three sidecars are allowed exactly 5 times.
const (
	sharedNS      = "agents-shared"
	sharedDepl    = "trio"
	redisRef      = "toolgate.local/redis:test"
	redisName     = "redis"
	redisSecret   = "toolgate-redis"
	sharedPolicy  = "pay-shared"
	sharedRule    = "pay-per-namespace"
	sharedMax     = 5
	sharedCalls   = 4 // per sidecar
	sharedReplica = 3
)

// redisServerPath is where the image holds redis-server: the binary
// decides what it is by its name (Debian's redis-server is a link to
// redis-check-rdb), so the name must stay redis-server.
const redisServerPath = "/usr/bin/redis-server"

// redisImage is an image of this machine's redis-server (Debian's package,
// the one the Redis tests use) with every shared library ldd lists, at the
// same paths, and the dynamic loader: no package manager, no shell.
func redisImage() (ociimage.Image, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return ociimage.Image{}, fmt.Errorf("install redis-server (apt-get install redis-server): %w", err)
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return ociimage.Image{}, err
	}
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		return ociimage.Image{}, fmt.Errorf("ldd %s: %w\n%s", bin, err, out)
	}
	libs, err := lddPaths(string(out))
	if err != nil {
		return ociimage.Image{}, fmt.Errorf("ldd %s: %w", bin, err)
	}
	img := ociimage.Static(redisRef, bin, redisServerPath, ociimage.ToolgateUser)
	for _, l := range libs {
		// Source is read through links: the image holds the files.
		img.Files = append(img.Files, ociimage.File{Path: l, Mode: 0o755, Source: l})
	}
	return img, nil
}

// lddLine is one library of ldd's output: "name => /path (0x...)" or, for
// the loader, "/path (0x...)". The vDSO has no path.
var lddLine = regexp.MustCompile(`^\s*(?:\S+\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)\s*$`)

func lddPaths(out string) ([]string, error) {
	var paths []string
	loader := false
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("a library is missing: %s", strings.TrimSpace(line))
		}
		m := lddLine.FindStringSubmatch(line)
		if m == nil {
			if strings.Contains(line, "vdso") {
				continue
			}
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		paths = append(paths, m[1])
		loader = loader || strings.Contains(m[1], "ld-linux")
	}
	if !loader {
		return nil, fmt.Errorf("no dynamic loader in %q", out)
	}
	return paths, nil
}

func sharedLimitAcrossReplicas(t *testing.T) {
	requireInstalled(t)
	c := ctx(t)
	password := randomHex(t)
	mustKubectl(t, "create", "namespace", sharedNS)
	defer deleteNamespace(t, sharedNS)
	defer sharedDiagnostics(t)
	mustKubectl(t, "create", "serviceaccount", "-n", sharedNS, agentSA)
	mustKubectl(t, "create", "secret", "generic", "-n", sharedNS, redisSecret, "--from-literal="+webhook.UsageStorePasswordKey+"="+password)

	started := time.Now()
	for _, o := range []client.Object{redisDeployment(), redisService()} {
		if err := node.Client.Create(c, o); err != nil {
			t.Fatal(err)
		}
	}
	mustKubectl(t, "rollout", "status", "-n", sharedNS, "deployment/"+redisName, "--timeout=120s")
	logDuration(t, "Redis Deployment created -> Ready", time.Since(started))
	svc, err := node.Clientset.CoreV1().Services(sharedNS).Get(c, redisName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The release points every injected sidecar at it. The node has no
	// cluster DNS: the agent Pods resolve the Service's name through
	// hostAliases, as a cluster's DNS would.
	redisHost := redisName + "." + sharedNS + ".svc"
	url := "redis://" + redisHost + ":6379/0"
	started = time.Now()
	out, err := helm.Run("upgrade", release, chart, "-n", releaseNS, "--reuse-values", "--wait", "--timeout", "4m",
		"--set", "usage.redis.url="+url, "--set", "usage.redis.passwordSecret="+redisSecret)
	if err != nil {
		t.Fatalf("helm upgrade --set usage.redis.url: %v\n%s", err, out)
	}
	defer restoreRelease(t)
	logDuration(t, "helm upgrade --set usage.redis.url,usage.redis.passwordSecret (managers rolled)", time.Since(started))
	// The rolled injector answers with the store (an old manager may still
	// answer while it terminates).
	testenv.EventuallyWithin(t, 60*time.Second, poll, "the injector passes --usage-store", func() (bool, string) {
		d := sharedDeployment(svc.Spec.ClusterIP, redisHost)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe-store", Namespace: sharedNS, Annotations: d.Spec.Template.Annotations},
			Spec: d.Spec.Template.Spec}
		if err := node.Client.Create(c, pod, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		if len(pod.Spec.InitContainers) == 0 {
			return false, "no sidecar injected"
		}
		args := pod.Spec.InitContainers[0].Args
		return slices.Contains(args, "--usage-store="+url), fmt.Sprintf("sidecar args %v", args)
	})

	// Until the rollout is done an old manager, terminating, may still be
	// an endpoint of the webhook Service: a call to it times out. Wait for
	// the rollout, then retry the webhooks' calls on that error alone.
	mustKubectl(t, "rollout", "status", "-n", releaseNS, "deployment/"+manager, "--timeout=120s")
	kubectlAdmitted(t, sharedPolicyYAML(), "apply", "-n", sharedNS, "-f", "-")
	mustKubectl(t, "wait", "-n", sharedNS, "--for=condition=Ready", "policy/"+sharedPolicy, "--timeout=60s")

	started = time.Now()
	testenv.EventuallyWithin(t, 60*time.Second, poll, "the agent Deployment admitted", func() (bool, string) {
		err := node.Client.Create(c, sharedDeployment(svc.Spec.ClusterIP, redisHost))
		if err != nil && !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatal(err)
		}
		return err == nil, fmt.Sprint(err)
	})
	pods := readyPods(t, sharedNS, sharedDepl, sharedReplica)
	logDuration(t, fmt.Sprintf("Deployment %s (%d replicas, shared store) created -> all Pods Ready", sharedDepl, sharedReplica), time.Since(started))
	for _, p := range pods {
		sidecarUsesStore(t, p, url)
	}

	// Every sidecar at once, each asked sharedCalls times in turn: one count.
	type result struct {
		pod string
		a   answer
		out string
		err error
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	started = time.Now()
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range sharedCalls {
				req := fmt.Sprintf(`{"tool_name":"pay","agent_id":"shop-%d","session_id":"s-%d-%d","kwargs":{"amount":%d}}`, i, i, j, 10+j)
				a, out, err := evaluateIn(sharedNS, p.Name, "agent", "env", req)
				mu.Lock()
				results = append(results, result{p.Name, a, out, err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	logDuration(t, fmt.Sprintf("%d pay calls through %d sidecars (kubectl exec each)", len(results), len(pods)), time.Since(started))
	allowed, denied := map[string]int{}, 0
	for _, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("pay through %s: %v\n%s", r.pod, r.err, r.out)
		case r.a.Decision == "allow":
			allowed[r.pod]++
		case r.a.Decision == "deny" && r.a.MatchedRuleID == sharedRule:
			denied++
		default:
			t.Errorf("pay through %s: %v, want allowed or denied by %s", r.pod, r.a, sharedRule)
		}
	}
	total := 0
	for _, n := range allowed {
		total += n
	}
	t.Logf("allowed per sidecar %v, %d denied by %s", allowed, denied, sharedRule)
	if want := sharedReplica * sharedCalls; total != sharedMax || denied != want-sharedMax {
		t.Errorf("%d pay calls through %d sidecars: %d allowed (%v), %d denied by %s; want exactly %d allowed in total",
			want, sharedReplica, total, allowed, denied, sharedRule, sharedMax)
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// kubectlAdmitted runs kubectl with stdin (none when "") until toolgate's
// webhooks answer it: a test run right after the webhook was away (the
// outage test, a manager rollout) may find its Service without a ready
// endpoint for a moment. Any other failure fails the test at once.
func kubectlAdmitted(t *testing.T, stdin string, args ...string) {
	t.Helper()
	testenv.EventuallyWithin(t, 60*time.Second, poll, "kubectl "+strings.Join(args, " ")+" admitted", func() (bool, string) {
		out, err := kubectlStdin(stdin, args...)
		if err != nil && !strings.Contains(out, "failed calling webhook") {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return err == nil, out
	})
}

// redisDeployment runs the Redis image, its password from the Secret the
// sidecars mount, nothing saved.
func redisDeployment() *appsv1.Deployment {
	one, labels := int32(1), map[string]string{"app": redisName}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: redisName, Namespace: sharedNS},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{AutomountServiceAccountToken: new(false), TerminationGracePeriodSeconds: new(int64(1)),
					Containers: []corev1.Container{{Name: "redis", Image: redisRef, ImagePullPolicy: corev1.PullNever,
						Args: []string{"--port", "6379", "--save", "", "--appendonly", "no", "--dir", "/tmp", "--requirepass", "$(REDIS_PASSWORD)"},
						Env: []corev1.EnvVar{{Name: "REDIS_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: redisSecret}, Key: webhook.UsageStorePasswordKey}}}},
						Ports:          []corev1.ContainerPort{{ContainerPort: 6379}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}}, PeriodSeconds: 1},
					}}}}}}
}

func redisService() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: redisName, Namespace: sharedNS},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": redisName},
			Ports: []corev1.ServicePort{{Port: 6379, TargetPort: intstr.FromInt32(6379)}}}}
}

// sharedDeployment is the agent Deployment of three injected replicas,
// the Redis Service's name resolving to its ClusterIP.
func sharedDeployment(clusterIP, host string) *appsv1.Deployment {
	d := pairDeployment()
	n := int32(sharedReplica)
	d.Name, d.Namespace, d.Spec.Replicas = sharedDepl, sharedNS, &n
	labels := map[string]string{"app": sharedDepl}
	d.Spec.Selector.MatchLabels, d.Spec.Template.Labels = labels, labels
	d.Spec.Template.Spec.HostAliases = []corev1.HostAlias{{IP: clusterIP, Hostnames: []string{host}}}
	return d
}

func sharedPolicyYAML() string {
	return fmt.Sprintf(`apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: %s}
spec:
  defaultEffect: allow
  rules:
  - id: %s
    description: at most %d payments an hour in the namespace, across every replica
    effect: deny
    targets: {tools: [pay]}
    when:
      rateLimit: {max: %d, window: 1h, per: namespace, store: shared}
`, sharedPolicy, sharedRule, sharedMax, sharedMax)
}

// readyPods waits for n Ready Pods of Deployment app in ns, none other.
func readyPods(t *testing.T, ns, app string, n int) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	testenv.EventuallyWithin(t, 120*time.Second, poll, fmt.Sprintf("%d %s Pods Ready", n, app), func() (bool, string) {
		list, err := node.Clientset.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error()
		}
		ready = ready[:0]
		for _, p := range list.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready = append(ready, p)
				}
			}
		}
		return len(ready) == n && len(list.Items) == n, fmt.Sprintf("%d of %d Pods Ready", len(ready), len(list.Items))
	})
	return ready
}

// sidecarUsesStore checks that the injector gave the sidecar the store and
// its password file, mounted into the sidecar alone.
func sidecarUsesStore(t *testing.T, p corev1.Pod, url string) {
	t.Helper()
	if len(p.Spec.InitContainers) == 0 || p.Spec.InitContainers[0].Name != webhook.SidecarName {
		t.Fatalf("Pod %s: no sidecar injected", p.Name)
	}
	sc := p.Spec.InitContainers[0]
	if !slices.Contains(sc.Args, "--usage-store="+url) || !slices.ContainsFunc(sc.Args, func(a string) bool {
		return strings.HasPrefix(a, "--usage-store-password-file=")
	}) {
		t.Errorf("Pod %s: the sidecar's args %v lack the store or its password file", p.Name, sc.Args)
	}
	for _, ctr := range p.Spec.Containers {
		for _, m := range ctr.VolumeMounts {
			if strings.Contains(m.MountPath, "usage-store") {
				t.Errorf("Pod %s: container %s mounts the store's password (%s)", p.Name, ctr.Name, m.MountPath)
			}
		}
	}
}

// restoreRelease puts the release back to the values it was installed
// with, without a store.
func restoreRelease(t *testing.T) {
	started := time.Now()
	out, err := helm.Run(append([]string{"upgrade", release, chart, "-n", releaseNS, "--wait", "--timeout", "4m"}, installArgs...)...)
	if err != nil {
		t.Errorf("helm upgrade back to the installed values: %v\n%s", err, out)
		return
	}
	logDuration(t, "helm upgrade back to the installed values (managers rolled)", time.Since(started))
}

// sharedDiagnostics shows, when the test failed, what Redis and the
// sidecars said.
func sharedDiagnostics(t *testing.T) {
	if !t.Failed() {
		return
	}
	for _, args := range [][]string{
		{"get", "pods,svc,policy", "-n", sharedNS, "-o", "wide"},
		{"describe", "pods", "-n", sharedNS},
		{"logs", "-n", sharedNS, "-l", "app=" + redisName, "--tail=40"},
		{"logs", "-n", sharedNS, "-l", "app=" + sharedDepl, "-c", webhook.SidecarName, "--tail=40", "--prefix"},
		{"get", "policy", "-n", sharedNS, "-o", "yaml"},
	} {
		out, err := kubectl(args...)
		t.Logf("kubectl %s (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

// deleteNamespace deletes ns and waits for it to go.
func deleteNamespace(t *testing.T, ns string) {
	started := time.Now()
	if out, err := kubectl("delete", "namespace", ns, "--timeout=120s"); err != nil {
		t.Errorf("deleting namespace %s: %v\n%s", ns, err, out)
		return
	}
	logDuration(t, "namespace "+ns+" deleted", time.Since(started))
}
