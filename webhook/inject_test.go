package webhook

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/endpoint"
)

var testInject = InjectOptions{Image: "ghcr.io/toolgate/toolgate:test", BundleConfigMap: "toolgate-bundle",
	Socket: endpoint.DefaultSocket, Listen: "127.0.0.1:8181", RunAsUser: DefaultSidecarUID, RunAsGroup: DefaultSidecarUID, Native: true, ClusterName: "test-cluster", MetricsPort: 9191, Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
	// As the manager sets it whenever it signs bundles (every install).
	TrustedKeysPEM: func() string { return testTrustedKeys }}

// testTrustedKeys are the public halves of a fresh keyring.
var testTrustedKeys = func() string {
	k, err := bundle.GenerateSigningKey()
	if err != nil {
		panic(err)
	}
	r, err := bundle.NewKeyring([]bundle.SigningKey{k})
	if err != nil {
		panic(err)
	}
	return string(r.PublicPEM())
}()

func pod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{ServiceAccountName: "agent-sa",
			Containers: []corev1.Container{{Name: "agent", Image: "python:3.12"}}},
	}
}

// admit creates p through the API server, webhooks and all, and returns the
// Pod as stored.
func admit(t *testing.T, p *corev1.Pod) corev1.Pod {
	t.Helper()
	if err := k8sClient.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var stored corev1.Pod
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(p), &stored); err != nil {
		t.Fatal(err)
	}
	return stored
}

// sidecarOf finds the sidecar wherever it was injected.
func sidecarOf(t *testing.T, p *corev1.Pod) *corev1.Container {
	t.Helper()
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Name == SidecarName {
				return &list[i]
			}
		}
	}
	return nil
}

// The API server stores what the mutating webhook returned: these tests
// create Pods and read back the stored objects.
func TestInjectsAnnotatedPods(t *testing.T) {
	ctx := context.Background()
	p := pod("agent-injected", map[string]string{v1alpha1.AnnotationInject: "true"})
	stored := admit(t, p)
	c := sidecarOf(t, &stored)
	if c == nil {
		t.Fatalf("no sidecar in stored pod: %+v", stored.Spec.Containers)
	}
	if c.Image != testInject.Image || !c.Resources.Requests.Cpu().Equal(resource.MustParse("10m")) {
		t.Errorf("image %q, resources %v", c.Image, c.Resources)
	}
	for _, want := range []string{"sidecar", "--configmap=$(POD_NAMESPACE)/toolgate-bundle", "--agent-id=$(TOOLGATE_AGENT_ID)",
		"--listen=unix:///var/run/toolgate/toolgate.sock", "--listen=127.0.0.1:8181",
		"--decision-log-label=namespace=$(POD_NAMESPACE)", "--decision-log-label=pod=$(POD_NAME)", "--decision-log-label=cluster=test-cluster", "--metrics-listen=:9191",
		"--service-account=agent-sa", "--usage-state=/var/cache/toolgate/usage",
		"--lease-pod=$(POD_NAME)", "--lease-pod-uid=$(POD_UID)"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if f := env["TOOLGATE_AGENT_ID"].ValueFrom; f == nil || f.FieldRef.FieldPath != "spec.serviceAccountName" {
		t.Errorf("agent id should come from the service account via the downward API: %+v", env["TOOLGATE_AGENT_ID"])
	}
	if f := env["POD_NAMESPACE"].ValueFrom; f == nil || f.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE: %+v", env["POD_NAMESPACE"])
	}
	// Prometheus finds the sidecar by the Pod label and the port name.
	if stored.Labels[v1alpha1.LabelInjected] != "true" {
		t.Errorf("pod labels %v lack %s", stored.Labels, v1alpha1.LabelInjected)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != MetricsPortName || c.Ports[0].ContainerPort != 9191 {
		t.Errorf("sidecar ports %+v, want %s 9191", c.Ports, MetricsPortName)
	}
	if f := env["POD_NAME"].ValueFrom; f == nil || f.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME: %+v", env["POD_NAME"])
	}
	// The Lease's owner: the Pod's UID, known only once it is stored.
	if f := env["POD_UID"].ValueFrom; f == nil || f.FieldRef.FieldPath != "metadata.uid" {
		t.Errorf("POD_UID: %+v", env["POD_UID"])
	}
	if sc := c.SecurityContext; sc == nil || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("security context: %+v", sc)
	}
	// A native sidecar: first among the init containers, restarted
	// always, so kubelet starts the agent only once its startup probe passes.
	if len(stored.Spec.InitContainers) == 0 || stored.Spec.InitContainers[0].Name != SidecarName {
		t.Errorf("the sidecar is not the first init container: %+v", stored.Spec.InitContainers)
	}
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("restartPolicy %v, want Always", c.RestartPolicy)
	}
	if len(stored.Spec.Containers) != 1 || stored.Spec.Containers[0].Name != "agent" {
		t.Errorf("containers %+v, want the agent alone", stored.Spec.Containers)
	}
	for name, pr := range map[string]struct {
		probe *corev1.Probe
		which string
	}{"startup": {c.StartupProbe, "alive"}, "readiness": {c.ReadinessProbe, "ready"}, "liveness": {c.LivenessProbe, "alive"}} {
		want := []string{"/toolgate", "sidecar", "probe", pr.which, "--listen=unix:///var/run/toolgate/toolgate.sock", "--timeout=1s"}
		if pr.probe == nil || pr.probe.Exec == nil || !slices.Equal(pr.probe.Exec.Command, want) {
			t.Errorf("%s probe %+v, want exec %q", name, pr.probe, want)
		}
	}
	if !slices.ContainsFunc(stored.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == cacheVolumeName && v.EmptyDir != nil }) {
		t.Errorf("no bundle cache volume: %+v", stored.Spec.Volumes)
	}

	// The service account may read that one ConfigMap and the namespace's
	// FrozenAgents, ask for approvals and write Leases (its own, says the
	// sidecar Lease admission policy), nothing else.
	var role rbacv1.Role
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: bundleReaderName}, &role); err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{"toolgate-bundle"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{
			"toolgate-bundle-1", "toolgate-bundle-2", "toolgate-bundle-3", "toolgate-bundle-4", "toolgate-bundle-5", "toolgate-bundle-6",
			"toolgate-bundle-7", "toolgate-bundle-8", "toolgate-bundle-9", "toolgate-bundle-10", "toolgate-bundle-11", "toolgate-bundle-12",
			"toolgate-bundle-13", "toolgate-bundle-14", "toolgate-bundle-15", "toolgate-bundle-16"}, Verbs: []string{"get"}},
		{APIGroups: []string{"toolgate.dev"}, Resources: []string{"frozenagents"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"toolgate.dev"}, Resources: []string{"approvalrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
		{APIGroups: []string{"toolgate.dev"}, Resources: []string{"approvalrequests/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}
	if !equality.Semantic.DeepEqual(role.Rules, want) {
		t.Errorf("role rules %+v", role.Rules)
	}
	var binding rbacv1.RoleBinding
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: bundleReaderName}, &binding); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(binding.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: "agent-sa", Namespace: ns}) {
		t.Errorf("binding subjects %+v", binding.Subjects)
	}
}

func TestAgentIDAnnotationWins(t *testing.T) {
	p := pod("agent-explicit-id", map[string]string{v1alpha1.AnnotationInject: "true", v1alpha1.AnnotationAgentID: "billing-bot-7"})
	stored := admit(t, p)
	c := sidecarOf(t, &stored)
	if c == nil {
		t.Fatal("no sidecar")
	}
	if !slices.Contains(c.Env, corev1.EnvVar{Name: "TOOLGATE_AGENT_ID", Value: "billing-bot-7"}) {
		t.Errorf("env %+v", c.Env)
	}
}

// The roles and environment annotations become the sidecar's --roles and
// --environment; an empty roles annotation binds no roles, and a Pod
// without them gets neither flag (requests' own values are used).
func TestRolesAndEnvironmentAnnotationsBecomeFlags(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want, not   []string
	}{
		{"both", map[string]string{v1alpha1.AnnotationRoles: "ci,analyst", v1alpha1.AnnotationEnvironment: "prod"},
			[]string{"--roles=ci,analyst", "--environment=prod"}, nil},
		{"no roles", map[string]string{v1alpha1.AnnotationRoles: ""}, []string{"--roles="}, []string{"--environment="}},
		{"neither", map[string]string{}, nil, []string{"--roles=", "--environment="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			annotations := map[string]string{v1alpha1.AnnotationInject: "true"}
			maps.Copy(annotations, tc.annotations)
			stored := admit(t, pod("agent-binding-"+strings.ReplaceAll(tc.name, " ", "-"), annotations))
			c := sidecarOf(t, &stored)
			if c == nil {
				t.Fatal("no sidecar")
			}
			for _, want := range tc.want {
				if !slices.Contains(c.Args, want) {
					t.Errorf("args %q lack %q", c.Args, want)
				}
			}
			for _, not := range tc.not {
				if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, not) }) {
					t.Errorf("args %q hold %s", c.Args, not)
				}
			}
		})
	}
}

func TestLeavesOtherPodsAlone(t *testing.T) {
	for i, annotations := range []map[string]string{nil, {v1alpha1.AnnotationInject: "false"}, {v1alpha1.AnnotationInject: "yes"}, {"other": "true"}} {
		p := pod(fmt.Sprintf("plain-%d", i), annotations)
		stored := admit(t, p)
		if len(stored.Spec.Containers) != 1 || len(stored.Spec.InitContainers) != 0 || len(stored.Spec.Volumes) != 0 || stored.Labels[v1alpha1.LabelInjected] != "" {
			t.Errorf("annotations %v: pod was changed: %+v", annotations, stored.Spec)
		}
	}
}

// InjectSidecar itself is idempotent (the admission path refuses a Pod that
// already carries a sidecar: TestAttackPodDeclaringOwnSidecarIsRefused).
func TestInjectSidecarIsIdempotent(t *testing.T) {
	p := pod("already-injected", map[string]string{v1alpha1.AnnotationInject: "true"})
	InjectSidecar(p, testInject)
	again := p.DeepCopy()
	InjectSidecar(again, testInject)
	if !equality.Semantic.DeepEqual(again.Spec, p.Spec) {
		t.Errorf("InjectSidecar changed an injected pod")
	}
}

// With Native off the sidecar is an ordinary container, for clusters
// older than 1.29; the API server accepts that shape too (the Pod is not
// annotated, so the webhook, which refuses a declared sidecar, is not called).
func TestClassicSidecarIsAnOrdinaryContainer(t *testing.T) {
	p := pod("classic-sidecar", nil)
	p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	o := testInject
	o.Native = false
	InjectSidecar(p, o)
	stored := admit(t, p)
	if len(stored.Spec.Containers) != 2 || stored.Spec.Containers[1].Name != SidecarName || stored.Spec.Containers[1].RestartPolicy != nil {
		t.Errorf("containers %+v, want the agent then the sidecar", stored.Spec.Containers)
	}
	if len(stored.Spec.InitContainers) != 1 || stored.Spec.InitContainers[0].Name != "setup" {
		t.Errorf("init containers %+v, want only the pod's own", stored.Spec.InitContainers)
	}
	if c := stored.Spec.Containers[1]; c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil {
		t.Errorf("the classic sidecar has no readiness probe: %+v", c.ReadinessProbe)
	}
}

// A native sidecar goes before the Pod's own init containers, so they can
// already ask for decisions.
func TestNativeSidecarPrecedesOtherInitContainers(t *testing.T) {
	p := pod("native-first", map[string]string{v1alpha1.AnnotationInject: "true"})
	p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	stored := admit(t, p)
	var names []string
	for _, c := range stored.Spec.InitContainers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{SidecarName, "setup"}) {
		t.Errorf("init containers %q, want [%s setup]", names, SidecarName)
	}
}

// An agent Pod that mounts no API token (automountServiceAccountToken:
// false, as a hardened agent should) still gets a sidecar that can watch
// its bundle: the sidecar alone mounts a projected token where client-go's
// in-cluster config reads it; the agent's containers do not.
func TestSidecarGetsATokenWhenThePodMountsNone(t *testing.T) {
	p := pod("no-token", map[string]string{v1alpha1.AnnotationInject: "true"})
	off := false
	p.Spec.AutomountServiceAccountToken = &off
	stored := admit(t, p)
	c := sidecarOf(t, &stored)
	if c == nil {
		t.Fatal("no sidecar")
	}
	if !hasMount(c, tokenVolumeName) {
		t.Errorf("sidecar mounts %+v, no token", c.VolumeMounts)
	}
	for _, agent := range stored.Spec.Containers {
		for _, m := range agent.VolumeMounts {
			if m.Name == tokenVolumeName {
				t.Errorf("the agent container %s mounts the sidecar's token", agent.Name)
			}
		}
	}
	i := slices.IndexFunc(stored.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == tokenVolumeName })
	if i < 0 || stored.Spec.Volumes[i].Projected == nil || len(stored.Spec.Volumes[i].Projected.Sources) != 3 {
		t.Fatalf("volumes %+v", stored.Spec.Volumes)
	}
	src := stored.Spec.Volumes[i].Projected.Sources
	if src[0].ServiceAccountToken == nil || src[0].ServiceAccountToken.Path != "token" ||
		src[1].ConfigMap == nil || src[1].ConfigMap.Name != "kube-root-ca.crt" ||
		src[2].DownwardAPI == nil || src[2].DownwardAPI.Items[0].Path != "namespace" {
		t.Errorf("projected sources %+v", src)
	}
}

// In a cluster the ServiceAccount admission plugin runs before webhooks and
// mounts the token only into the containers it saw, not into the sidecar
// added later (envtest disables that plugin, so the test plays it): the
// sidecar reuses that volume, and no second token is added.
func TestSidecarReusesTheServiceAccountTokenMount(t *testing.T) {
	p := pod("sa-plugin-token", map[string]string{v1alpha1.AnnotationInject: "true"})
	p.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: sidecarTokenVolume().VolumeSource}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: tokenMountPath, ReadOnly: true}}
	stored := admit(t, p)
	c := sidecarOf(t, &stored)
	if c == nil {
		t.Fatal("no sidecar")
	}
	if !hasMount(c, "kube-api-access-x7k2p") {
		t.Errorf("sidecar mounts %+v, not the ServiceAccount plugin's kube-api-access-x7k2p", c.VolumeMounts)
	}
	if slices.ContainsFunc(stored.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == tokenVolumeName }) {
		t.Error("a second token volume was added next to the ServiceAccount plugin's")
	}
}

// hasMount tells whether c mounts volume read-only at the token path.
func hasMount(c *corev1.Container, volume string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == volume && m.MountPath == tokenMountPath && m.ReadOnly
	})
}

// The sidecar answers on a socket in a directory the agent cannot write:
// it runs as its own non-root user with the socket's emptyDir read-write,
// every other container and init container mounts it read-only and is
// told where it is by TOOLGATE_URL, unless it says otherwise itself. A
// container already using that directory keeps it and is sent to the
// loopback port instead.
func TestAgentContainersGetTheSocketReadOnly(t *testing.T) {
	p := pod("socket-pod", map[string]string{v1alpha1.AnnotationInject: "true"})
	p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	p.Spec.Containers = append(p.Spec.Containers,
		corev1.Container{Name: "own-url", Image: "python:3.12", Env: []corev1.EnvVar{{Name: endpoint.EnvURL, Value: "http://127.0.0.1:8181"}}},
		corev1.Container{Name: "own-dir", Image: "python:3.12", VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: "/var/run/toolgate/"}}},
		corev1.Container{Name: "inside-dir", Image: "python:3.12", VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: "/var/run/toolgate/cfg"}}})
	p.Spec.Volumes = []corev1.Volume{{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	stored := admit(t, p)
	c := sidecarOf(t, &stored)
	if c == nil {
		t.Fatal("no sidecar")
	}
	sc := c.SecurityContext
	if sc == nil || *sc.RunAsUser != DefaultSidecarUID || *sc.RunAsGroup != DefaultSidecarUID || !*sc.RunAsNonRoot ||
		*sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("sidecar security context %+v", sc)
	}
	socketMount := func(c *corev1.Container) *corev1.VolumeMount {
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].Name == socketVolumeName {
				return &c.VolumeMounts[i]
			}
		}
		return nil
	}
	if m := socketMount(c); m == nil || m.ReadOnly || m.MountPath != "/var/run/toolgate" {
		t.Errorf("the sidecar's socket mount %+v, want /var/run/toolgate read-write", m)
	}
	env := func(c *corev1.Container) string {
		for _, e := range c.Env {
			if e.Name == endpoint.EnvURL {
				return e.Value
			}
		}
		return ""
	}
	want := map[string]struct {
		mounted bool
		url     string
	}{
		"setup":      {true, "unix:///var/run/toolgate/toolgate.sock"},
		"agent":      {true, "unix:///var/run/toolgate/toolgate.sock"},
		"own-url":    {true, "http://127.0.0.1:8181"},
		"own-dir":    {false, "http://127.0.0.1:8181"},
		"inside-dir": {false, "http://127.0.0.1:8181"},
	}
	seen := 0
	for _, list := range [][]corev1.Container{stored.Spec.InitContainers, stored.Spec.Containers} {
		for i := range list {
			c := &list[i]
			w, ok := want[c.Name]
			if !ok {
				continue
			}
			seen++
			m := socketMount(c)
			if w.mounted != (m != nil) || (m != nil && (!m.ReadOnly || m.MountPath != "/var/run/toolgate")) {
				t.Errorf("%s: socket mount %+v, want mounted=%v read-only", c.Name, m, w.mounted)
			}
			if got := env(c); got != w.url {
				t.Errorf("%s: %s=%q, want %q", c.Name, endpoint.EnvURL, got, w.url)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d containers", seen, len(want))
	}
	i := slices.IndexFunc(stored.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == socketVolumeName })
	if i < 0 || stored.Spec.Volumes[i].EmptyDir == nil {
		t.Errorf("no socket emptyDir: %+v", stored.Spec.Volumes)
	}
}

// Without a socket (--sidecar-socket=""), the sidecar answers on the
// loopback port alone, probed there, and TOOLGATE_URL says so.
func TestInjectionWithoutASocket(t *testing.T) {
	p := pod("no-socket", map[string]string{v1alpha1.AnnotationInject: "true"})
	o := testInject
	o.Socket = ""
	InjectSidecar(p, o)
	// The API server stores what InjectSidecar built; annotated, the
	// webhook would refuse a Pod that already declares the sidecar.
	delete(p.Annotations, v1alpha1.AnnotationInject)
	stored := admit(t, p)
	c := sidecarOf(t, &stored)
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--listen=unix:") }) {
		t.Errorf("args %q", c.Args)
	}
	if got := c.ReadinessProbe.Exec.Command; !slices.Contains(got, "--listen=127.0.0.1:8181") {
		t.Errorf("readiness probe %q", got)
	}
	if slices.ContainsFunc(stored.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == socketVolumeName }) {
		t.Error("a socket volume without a socket")
	}
	if e := stored.Spec.Containers[0].Env; len(e) != 1 || e[0] != (corev1.EnvVar{Name: endpoint.EnvURL, Value: "http://127.0.0.1:8181"}) {
		t.Errorf("agent env %+v", e)
	}
}
