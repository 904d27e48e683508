package webhook

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

// refused creates p through the API server and wants it refused with every
// one of msgs in the error, and not stored.
func refused(t *testing.T, p *corev1.Pod, msgs ...string) {
	t.Helper()
	err := k8sClient.Create(context.Background(), p)
	if err == nil {
		t.Fatalf("pod %s/%s was admitted: %+v", p.Namespace, p.Name, p.Spec)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("pod %s: error %q lacks %q", p.Name, err, m)
		}
	}
	var stored corev1.Pod
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(p), &stored); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s is stored: %v", p.Name, err)
	}
}

var injectMe = map[string]string{v1alpha1.AnnotationInject: "true"}

// TestAttackPodDeclaringOwnSidecarIsRefused: a Pod author declares the
// sidecar themselves (with their own flags, or none, or a dump of an
// injected Pod re-applied) so that the guard next to their agent is theirs.
// The injector once skipped such a Pod silently and it ran with that
// container; now the API server refuses it with the reason.
func TestAttackPodDeclaringOwnSidecarIsRefused(t *testing.T) {
	fake := corev1.Container{Name: SidecarName, Image: testInject.Image,
		Args: []string{"sidecar", "--bundle-file=/allow-everything.json", "--listen=127.0.0.1:8181"}}
	asContainer := pod("own-sidecar", injectMe)
	asContainer.Spec.Containers = append(asContainer.Spec.Containers, fake)
	refused(t, asContainer, `spec.containers[1].name: Forbidden: "toolgate-sidecar" is the container toolgate injects`)

	asInit := pod("own-native-sidecar", injectMe)
	always := corev1.ContainerRestartPolicyAlways
	native := fake
	native.RestartPolicy = &always
	asInit.Spec.InitContainers = []corev1.Container{native}
	refused(t, asInit, `spec.initContainers[0].name: Forbidden`, "may not declare its own")

	dump := pod("reapplied-dump", injectMe)
	InjectSidecar(dump, testInject)
	refused(t, dump, `"toolgate-sidecar" is the container toolgate injects`)
}

// TestAttackPodMountingSidecarVolumesIsRefused: the agent's container
// mounts the sidecar's API token (to act as the sidecar's identity) or its
// bundle cache (to plant a bundle served at the next restart).
func TestAttackPodMountingSidecarVolumesIsRefused(t *testing.T) {
	// Mounting without declaring: the injector then declared the volume
	// itself, and the Pod ran with the agent sharing it (admitted before).
	never := false
	token := pod("mounts-token", injectMe)
	token.Spec.AutomountServiceAccountToken = &never
	token.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: tokenVolumeName, MountPath: "/stolen"}}
	refused(t, token, `spec.containers[0].volumeMounts[0].name: Forbidden: volume "toolgate-sidecar-token" is the sidecar's API token: only the injected toolgate-sidecar container may mount it`)

	cache := pod("mounts-cache", injectMe)
	cache.Spec.InitContainers = []corev1.Container{{Name: "plant", Image: "busybox",
		VolumeMounts: []corev1.VolumeMount{{Name: cacheVolumeName, MountPath: "/cache"}}}}
	refused(t, cache, `spec.initContainers[0].volumeMounts[0].name: Forbidden: volume "toolgate-bundle-cache" is the sidecar's bundle cache`)

	// Mounted writable, the socket's directory would let the agent replace
	// the socket (admitted before: the injector then declared the volume).
	sock := pod("mounts-socket", injectMe)
	sock.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: socketVolumeName, MountPath: "/mnt/s"}}
	refused(t, sock, `spec.containers[0].volumeMounts[0].name: Forbidden: volume "toolgate-socket" is the sidecar's decision socket directory`)

	// A volume of the agent's own at the token path is not a token: the
	// sidecar gets a projected token of its own instead of credentials the
	// agent could rewrite (before, it mounted the agent's emptyDir).
	fake := pod("fake-token", injectMe)
	fake.Spec.AutomountServiceAccountToken = &never
	fake.Spec.Volumes = []corev1.Volume{{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	fake.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: tokenMountPath}}
	stored := admit(t, fake)
	for _, m := range sidecarOf(t, &stored).VolumeMounts {
		if m.MountPath == tokenMountPath && m.Name != tokenVolumeName {
			t.Errorf("the sidecar's token comes from the agent's volume %q", m.Name)
		}
	}

	// Declaring them: a clear refusal, not the API server's duplicate name.
	declared := pod("declares-cache", injectMe)
	declared.Spec.Volumes = []corev1.Volume{{Name: cacheVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	refused(t, declared, `spec.volumes[0].name: Forbidden: volume name "toolgate-bundle-cache" is reserved for the sidecar's bundle cache`)

	// The agent's own service account token is its own: mounting it stays
	// allowed, and the sidecar reuses it.
	ok := pod("own-token-ok", injectMe)
	ok.Spec.AutomountServiceAccountToken = nil
	stored = admit(t, ok)
	if sidecarOf(t, &stored) == nil {
		t.Error("an ordinary annotated pod was not injected")
	}
}

// enforcePolicy reads the shipped enforce-sidecar objects (config/enforce;
// the chart renders the same, see test/chart), installed for a manager
// injecting with o: the policy's installation variables say what that
// manager writes, as the chart fills them from its values.
func enforcePolicy(t *testing.T, o InjectOptions) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "enforce", "enforce-sidecar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vap admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for _, into := range []any{&vap, &binding} {
		doc, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("more than two objects in enforce-sidecar.yaml: %v", err)
	}
	vars := enforceVariables(o)
	for i, v := range vap.Spec.Variables {
		if expr, ok := vars[v.Name]; ok {
			vap.Spec.Variables[i].Expression = expr
			delete(vars, v.Name)
		}
	}
	if len(vars) > 0 {
		t.Fatalf("the enforce policy has no variables %v", slices.Collect(maps.Keys(vars)))
	}
	return &vap, &binding
}

// enforceVariables are the enforce policy's installation variables, as CEL
// expressions, for a manager injecting with o.
func enforceVariables(o InjectOptions) map[string]string {
	pull := o.ImagePullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent // the API server's default for a tagged image
	}
	return map[string]string{
		"image": strconv.Quote(o.Image), "pullPolicy": strconv.Quote(string(pull)),
		"bundleConfigMap": strconv.Quote(o.BundleConfigMap), "socket": strconv.Quote(o.Socket), "listen": strconv.Quote(o.Listen),
		"uid": strconv.FormatInt(o.RunAsUser, 10), "gid": strconv.FormatInt(o.RunAsGroup, 10), "native": strconv.FormatBool(o.Native),
		"metricsPort": strconv.Itoa(int(o.MetricsPort)), "clusterName": strconv.Quote(o.ClusterName),
		"usageStore": strconv.Quote(o.UsageStore), "usageStoreSecret": strconv.Quote(o.UsageStorePasswordSecret),
	}
}

// installEnforcePolicy installs vap and binding until the test ends, and
// waits until the API server applies them: a plain Pod in namespace (an
// enforce namespace) is refused.
func installEnforcePolicy(t *testing.T, vap *admissionv1.ValidatingAdmissionPolicy, binding *admissionv1.ValidatingAdmissionPolicyBinding, namespace string) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{vap, binding} {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, o) })
	}
	n := 0
	testenv.Eventually(t, "the enforce policy to refuse a plain Pod", func() (bool, string) {
		n++
		p := pod("probe-"+strings.Repeat("x", n%50+1), nil)
		p.Namespace = namespace
		err := k8sClient.Create(ctx, p)
		if err == nil {
			_ = k8sClient.Delete(ctx, p)
			return false, "admitted"
		}
		return strings.Contains(err.Error(), vap.Name), err.Error()
	})
}

// TestAttackUnguardedPodRefusedInEnforceNamespace: in a namespace labelled
// toolgate.dev/enforce=true an agent Pod never runs without the sidecar:
// not when it skips the annotation, not when it declares its own sidecar
// without it, and not when the injector is down (its webhook fails open).
// Without the shipped policy every one of these Pods is admitted.
func TestAttackUnguardedPodRefusedInEnforceNamespace(t *testing.T) {
	ctx := context.Background()
	const enforced = "enforced"
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: enforced,
		Labels: map[string]string{v1alpha1.LabelEnforce: "true"}}}); err != nil {
		t.Fatal(err)
	}
	inNS := func(p *corev1.Pod) *corev1.Pod { p.Namespace = enforced; return p }
	vap, binding := enforcePolicy(t, testInject)
	installEnforcePolicy(t, vap, binding, enforced)

	refused(t, inNS(pod("plain", nil)), `must be annotated toolgate.dev/inject: "true"`, "toolgate.dev/enforce=true")
	own := inNS(pod("own-sidecar-unannotated", nil))
	own.Labels = map[string]string{v1alpha1.LabelInjected: "true"}
	own.Spec.Containers = append(own.Spec.Containers, corev1.Container{Name: SidecarName, Image: "evil"})
	refused(t, own, `must be annotated toolgate.dev/inject: "true"`)

	// The injector up: an enforce namespace registers its agents, so the
	// annotated Pod is refused until an admin registers its ServiceAccount
	// (issue 24), then injected and admitted.
	refused(t, inNS(pod("guarded", injectMe)), `ServiceAccount "agent-sa" has no Agent`)
	registration := &v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: enforced, Name: "agent"}, Spec: v1alpha1.AgentSpec{ServiceAccountName: "agent-sa"}}
	if err := k8sClient.Create(ctx, registration); err != nil {
		t.Fatal(err)
	}
	stored := admit(t, inNS(pod("guarded", injectMe)))
	if sidecarOf(t, &stored) == nil {
		t.Fatal("admitted without a sidecar")
	}
	injected := injectedDryRun(t, k8sClient, inNS(pod("replayed", injectMe)))

	// The injector down: the API server ignores the failed call (failurePolicy
	// Ignore) and the policy refuses the Pod instead of letting it run
	// unguarded.
	setInjectorURL(t, "https://127.0.0.1:1/mutate-v1-pod")
	refused(t, inNS(pod("while-injector-down", injectMe)), "the toolgate injector did not add its sidecar", "refused until the injector is back")
	// Nor does a Pod that brings its own sidecar while the injector cannot
	// refuse it.
	own = inNS(pod("own-sidecar-while-injector-down", injectMe))
	own.Labels = map[string]string{v1alpha1.LabelInjected: "true"}
	own.Spec.Containers = append(own.Spec.Containers, corev1.Container{Name: SidecarName, Image: testInject.Image,
		Args: []string{"sidecar", "--bundle-file=/allow-everything.json"}})
	refused(t, own, "the toolgate-sidecar container is not the injected one")
	// Its own image with the injected arguments: refused too.
	evil := inNS(pod("own-image-while-injector-down", injectMe))
	InjectSidecar(evil, testInject)
	for i := range evil.Spec.InitContainers {
		if evil.Spec.InitContainers[i].Name == SidecarName {
			evil.Spec.InitContainers[i].Image = "evil.example/allow-everything:1"
		}
	}
	refused(t, evil, "the toolgate-sidecar container is not the injected one")
	// What the injector wrote passes that check (the Pod was refused above
	// only because the injector did not run).
	genuine := replay(&injected, "injected-replayed-while-injector-down")
	if err := k8sClient.Create(ctx, genuine); err != nil {
		t.Errorf("a Pod carrying exactly the injected sidecar: %v", err)
	}
	// kubectl debug while the injector is down: the policy applies its
	// rules to the added containers.
	for _, ec := range []corev1.EphemeralContainer{
		debugContainer("socket-rw", corev1.VolumeMount{Name: socketVolumeName, MountPath: "/mnt/s"}),
		debugContainer("cache", corev1.VolumeMount{Name: cacheVolumeName, MountPath: "/cache"}),
		func() corev1.EphemeralContainer {
			ec := debugContainer("as-sidecar")
			uid := testInject.RunAsUser
			ec.SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
			return ec
		}(),
		func() corev1.EphemeralContainer {
			ec := debugContainer("targets-sidecar")
			ec.TargetContainerName = SidecarName
			return ec
		}(),
	} {
		debugRefused(t, k8sClient, *genuine, ec, "may not mount the toolgate sidecar's volumes")
	}
	// Read-only, as the injector mounts it, the socket is allowed.
	if err := debug(t, k8sClient, *genuine, debugContainer("socket-ro",
		corev1.VolumeMount{Name: socketVolumeName, MountPath: "/var/run/toolgate", ReadOnly: true})); err != nil {
		t.Errorf("an ordinary debug container while the injector is down: %v", err)
	}
	// Nor may the sidecar's image change; the agent's may.
	var running corev1.Pod
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(genuine), &running); err != nil {
		t.Fatal(err)
	}
	swapped := running.DeepCopy()
	sidecarOf(t, swapped).Image = "evil.example/allow-everything:1"
	if err := k8sClient.Patch(ctx, swapped, client.MergeFrom(&running)); err == nil || !strings.Contains(err.Error(), "image cannot change on a running Pod") {
		t.Errorf("replacing the sidecar's image while the injector is down: %v", err)
	}
	agent := running.DeepCopy()
	agent.Spec.Containers[0].Image = "python:3.13"
	if err := k8sClient.Patch(ctx, agent, client.MergeFrom(&running)); err != nil {
		t.Errorf("updating the agent's image while the injector is down: %v", err)
	}
	// Elsewhere, the same Pod is still admitted (without a sidecar): only
	// enforce namespaces wait.
	elsewhere := pod("unenforced-while-injector-down", injectMe)
	if err := k8sClient.Create(ctx, elsewhere); err != nil {
		t.Errorf("outside an enforce namespace: %v", err)
	}
}

// setInjectorURL points the pod webhook at url, an injector that cannot
// answer, until the test ends. Each change waits until the API server
// calls the webhook the new way: the configuration reaches its admission
// chain through an informer.
func setInjectorURL(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	var saved *string
	change := func(to func(*string) *string, injected bool) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var m admissionv1.MutatingWebhookConfiguration
			if err := k8sClient.Get(ctx, client.ObjectKey{Name: "mutating-webhook-configuration"}, &m); err != nil {
				return err
			}
			for i := range m.Webhooks {
				if strings.Contains(m.Webhooks[i].Name, "mpod") {
					m.Webhooks[i].ClientConfig.URL = to(m.Webhooks[i].ClientConfig.URL)
				}
			}
			return k8sClient.Update(ctx, &m)
		})
		if err != nil {
			t.Fatal(err)
		}
		waitForInjector(t, injected)
	}
	change(func(old *string) *string { saved = old; return &url }, false)
	t.Cleanup(func() { change(func(*string) *string { return saved }, true) })
}

// waitForInjector waits until a dry-run create of an annotated Pod, outside
// any enforce namespace, comes back injected (the injector answers) or not
// (the API server ignores its failed call).
func waitForInjector(t *testing.T, injected bool) {
	t.Helper()
	what := "the API server to call the injector"
	if !injected {
		what = "the API server to find no injector"
	}
	testenv.Eventually(t, what, func() (bool, string) {
		p := pod("injector-probe", injectMe)
		if err := k8sClient.Create(context.Background(), p, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		got := sidecarOf(t, p) != nil
		return got == injected, fmt.Sprintf("a dry-run annotated Pod injected: %v", got)
	})
}

// Malformed roles or environment annotations are refused at admission,
// naming the annotation, rather than crash-looping the sidecar, and
// nothing in them reaches the sidecar's args (where kubelet would expand
// $(VAR)).
func TestMalformedBindingAnnotationsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, key, value, want string
	}{
		{"empty role", v1alpha1.AnnotationRoles, "ci,,analyst", "role 2 of"},
		{"trailing comma", v1alpha1.AnnotationRoles, "ci,", "a name is empty"},
		{"spaces", v1alpha1.AnnotationRoles, "ci, analyst", "may hold only letters"},
		{"variable", v1alpha1.AnnotationRoles, "$(POD_NAME)", "may hold only letters"},
		{"too many", v1alpha1.AnnotationRoles, strings.Repeat("r,", 64) + "r", "more than 64"},
		{"empty environment", v1alpha1.AnnotationEnvironment, "", "a name is empty"},
		{"two environments", v1alpha1.AnnotationEnvironment, "prod,dev", "may hold only letters"},
		{"long environment", v1alpha1.AnnotationEnvironment, strings.Repeat("e", 254), "more than 253"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("bad-binding-"+strings.ReplaceAll(tc.name, " ", "-"),
				map[string]string{v1alpha1.AnnotationInject: "true", tc.key: tc.value})
			refused(t, p, "metadata.annotations["+tc.key+"]: Invalid value", tc.want)
		})
	}
}

// TestAttackContainerRunningAsSidecarUIDIsRefused: the Pod's own
// containers may not run as the sidecar's user either, set on the
// container or inherited from the Pod (the sidecar sets its own).
func TestAttackContainerRunningAsSidecarUIDIsRefused(t *testing.T) {
	uid, other := int64(DefaultSidecarUID), int64(1000)
	onContainer := pod("agent-as-sidecar-uid", injectMe)
	onContainer.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
	refused(t, onContainer, `spec.containers[0].securityContext.runAsUser: Forbidden: 64181 is the injected toolgate-sidecar container's user`)

	onPod := pod("pod-as-sidecar-uid", injectMe)
	onPod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid}
	onPod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	refused(t, onPod, `spec.securityContext.runAsUser: Forbidden: 64181 is the injected toolgate-sidecar container's user`,
		"spec.initContainers[0]", "spec.containers[0]")

	// Every container says otherwise: the Pod's default is not used.
	overridden := pod("pod-uid-overridden", injectMe)
	overridden.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid}
	overridden.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: &other}
	if stored := admit(t, overridden); sidecarOf(t, &stored) == nil {
		t.Error("not injected")
	}
}

// TestAttackPodMountingMCPCredentialVolumeIsRefused: the agent's container
// mounts the volume the injector will add for an MCP upstream's
// credential, without declaring it: refuseMCP only looked at volumes the
// Pod declared, the injector then declared it, and the agent read the
// Secret meant for the sidecar alone.
func TestAttackPodMountingMCPCredentialVolumeIsRefused(t *testing.T) {
	p := pod("mounts-mcp-credential", map[string]string{v1alpha1.AnnotationInject: "true",
		AnnotationMCPUpstreams: "github=https://mcp.example.com/;secret=gh-cred"})
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: mcpVolumePrefix + "github", MountPath: "/stolen"}}
	refused(t, p, `spec.containers[0].volumeMounts[0].name: Forbidden: volume "toolgate-mcp-github" is an MCP upstream's credential`)
}
