package webhook

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/endpoint"
	"github.com/toolgate/toolgate/internal/testenv"
)

// mallory is a Pod author in the suite's namespace: she holds the built-in
// edit role and, as a cluster grants its developers for kubectl debug,
// patch and update on pods/ephemeralcontainers (edit alone has neither:
// TestEditAloneCannotAddEphemeralContainers).
const mallory = "mallory"

var podAuthor = []string{"system:authenticated"}

// editor is mallory's client, once RBAC lets her add ephemeral containers:
// without that the attacks below prove nothing.
func editor(t *testing.T) client.Client { t.Helper(); return editorIn(t, ns) }

// editorIn is editor in namespace ns.
func editorIn(t *testing.T, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	testenv.BindEdit(t, k8sClient, ns, mallory)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "debugger"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: []string{"patch", "update"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "debugger-" + mallory},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: mallory}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8sClient.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, verb := range []string{"patch", "update"} {
		if !testenv.CanEventually(t, k8sClient, mallory, podAuthor, verb, "", "pods/ephemeralcontainers", ns, "") {
			t.Fatalf("RBAC: %s may not %s pods/ephemeralcontainers in %s; the test would prove nothing", mallory, verb, ns)
		}
	}
	return testenv.Impersonate(t, restConfig, mallory, podAuthor...)
}

// The built-in edit role (Kubernetes 1.37) does not let a Pod author add
// ephemeral containers: the attacks below need a cluster that grants
// pods/ephemeralcontainers, as many do for kubectl debug. The security
// model (docs/security.md) says so; this fails when Kubernetes changes it.
func TestEditAloneCannotAddEphemeralContainers(t *testing.T) {
	const eve = "eve"
	testenv.BindEdit(t, k8sClient, ns, eve)
	if !testenv.CanEventually(t, k8sClient, eve, podAuthor, "create", "", "pods", ns, "") {
		t.Fatalf("RBAC: edit does not let %s create Pods; the test would prove nothing", eve)
	}
	for _, verb := range []string{"patch", "update"} {
		if testenv.Can(t, k8sClient, eve, podAuthor, verb, "", "pods/ephemeralcontainers", ns, "") {
			t.Errorf("edit lets %s %s pods/ephemeralcontainers: update docs/security.md", eve, verb)
		}
	}
}

// injectedPod is an agent Pod as the injector admitted it, without an
// automounted token so that the sidecar has a token volume of its own.
func injectedPod(t *testing.T, name string) corev1.Pod {
	t.Helper()
	never := false
	p := pod(name, injectMe)
	p.Spec.AutomountServiceAccountToken = &never
	stored := admit(t, p)
	if sidecarOf(t, &stored) == nil {
		t.Fatal("not injected")
	}
	return stored
}

// debug adds ec to the stored Pod named like p through the
// pods/ephemeralcontainers subresource as c, with the strategic merge patch
// kubectl debug sends, and returns the API server's answer.
func debug(t *testing.T, c client.Client, p corev1.Pod, ec corev1.EphemeralContainer) error {
	t.Helper()
	var stored corev1.Pod
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(&p), &stored); err != nil {
		t.Fatal(err)
	}
	debugged := stored.DeepCopy()
	debugged.Spec.EphemeralContainers = append(debugged.Spec.EphemeralContainers, ec)
	return c.SubResource("ephemeralcontainers").Patch(context.Background(), debugged, client.StrategicMergeFrom(&stored))
}

// debugRefused wants debug refused with every one of msgs, and the Pod
// without that ephemeral container.
func debugRefused(t *testing.T, c client.Client, p corev1.Pod, ec corev1.EphemeralContainer, msgs ...string) {
	t.Helper()
	err := debug(t, c, p, ec)
	if err == nil {
		t.Errorf("ephemeral container %s was added to %s: %+v", ec.Name, p.Name, ec)
	}
	for _, m := range msgs {
		if err != nil && !strings.Contains(err.Error(), m) {
			t.Errorf("ephemeral container %s: error %q lacks %q", ec.Name, err, m)
		}
	}
	if ephemeral(t, p, ec.Name) != nil {
		t.Errorf("ephemeral container %s is stored in %s", ec.Name, p.Name)
	}
}

// ephemeral is the stored ephemeral container name of p, nil without one.
func ephemeral(t *testing.T, p corev1.Pod, name string) *corev1.EphemeralContainer {
	t.Helper()
	var stored corev1.Pod
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(&p), &stored); err != nil {
		t.Fatal(err)
	}
	for i := range stored.Spec.EphemeralContainers {
		if stored.Spec.EphemeralContainers[i].Name == name {
			return &stored.Spec.EphemeralContainers[i]
		}
	}
	return nil
}

func debugContainer(name string, mounts ...corev1.VolumeMount) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: "busybox", VolumeMounts: mounts}}
}

// TestAttackEphemeralContainerMountingSidecarVolumesIsRefused: a Pod
// author debugs their running agent Pod (kubectl debug) with a container
// that mounts the socket's directory read-write, and replaces the socket
// with one answering allow to everything; or mounts the sidecar's token or
// bundle cache. The injector refuses these in the Pod's own containers, but
// ephemeral containers are added through pods/ephemeralcontainers, which
// it never saw: every one of these was added.
func TestAttackEphemeralContainerMountingSidecarVolumesIsRefused(t *testing.T) {
	attacker := editor(t)
	p := injectedPod(t, "debugged-volumes")
	for _, tc := range []struct {
		ec   corev1.EphemeralContainer
		want string
	}{
		{debugContainer("socket-rw", corev1.VolumeMount{Name: socketVolumeName, MountPath: "/mnt/s"}),
			`spec.ephemeralContainers[0].volumeMounts[0].name: Forbidden: volume "toolgate-socket" is the sidecar's decision socket directory`},
		// Where the injector mounts it, but writable.
		{debugContainer("socket-rw-at-home", corev1.VolumeMount{Name: socketVolumeName, MountPath: "/var/run/toolgate"}),
			`volume "toolgate-socket" is the sidecar's decision socket directory`},
		// Read-only as the injector would: still the injector's to add.
		{debugContainer("socket-ro", corev1.VolumeMount{Name: socketVolumeName, MountPath: "/mnt/s", ReadOnly: true}),
			`volume "toolgate-socket" is the sidecar's decision socket directory`},
		{debugContainer("token", corev1.VolumeMount{Name: tokenVolumeName, MountPath: "/stolen"}),
			`volume "toolgate-sidecar-token" is the sidecar's API token: only the injected toolgate-sidecar container may mount it`},
		{debugContainer("cache", corev1.VolumeMount{Name: cacheVolumeName, MountPath: "/cache"}),
			`volume "toolgate-bundle-cache" is the sidecar's bundle cache`},
	} {
		t.Run(tc.ec.Name, func(t *testing.T) {
			debugRefused(t, attacker, p, tc.ec, tc.want)
		})
	}
}

// TestAttackEphemeralContainerRunningAsSidecarUIDIsRefused: an ephemeral
// container running as the sidecar's own user could, in a Pod sharing its
// process namespace, signal or trace the sidecar and reach its writable
// socket directory through /proc/PID/root. One that targets the sidecar
// (kubectl debug --target) joins the sidecar's process namespace whatever
// the Pod says, and with CAP_SYS_PTRACE (kubectl debug --profile=general)
// reaches it as any user. Both were added.
func TestAttackEphemeralContainerRunningAsSidecarUIDIsRefused(t *testing.T) {
	attacker := editor(t)
	p := injectedPod(t, "debugged-uid")
	uid := int64(DefaultSidecarUID)
	asSidecar := debugContainer("as-sidecar")
	asSidecar.SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
	debugRefused(t, attacker, p, asSidecar,
		`spec.ephemeralContainers[0].securityContext.runAsUser: Forbidden: 64181 is the injected toolgate-sidecar container's user`)

	target := debugContainer("targets-sidecar")
	target.TargetContainerName = SidecarName
	debugRefused(t, attacker, p, target,
		`spec.ephemeralContainers[0].targetContainerName: Forbidden: "toolgate-sidecar" is the container toolgate injects`)

	// Inherited from the Pod, which every container of its own overrides.
	other := int64(1000)
	podUID := pod("debugged-pod-uid", injectMe)
	podUID.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid}
	podUID.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: &other}
	debugRefused(t, attacker, admit(t, podUID), debugContainer("inherits"),
		`spec.securityContext.runAsUser: Forbidden: 64181 is the injected toolgate-sidecar container's user`, "spec.ephemeralContainers[0] run as it")

	// The same Pod can still be debugged: as another user, targeting the
	// agent.
	ok := debugContainer("debugs-agent")
	ok.SecurityContext = &corev1.SecurityContext{RunAsUser: &other}
	ok.TargetContainerName = "agent"
	if err := debug(t, attacker, p, ok); err != nil {
		t.Fatalf("an ordinary debug container: %v", err)
	}
}

// TestAttackEphemeralUpdateCannotHideThePod: the API server asks the
// injector about an ephemeral container only for Pods that carry the
// sidecar, read from the Pod as stored. A Pod author who removes the
// toolgate.dev/inject annotation and toolgate.dev/injected label from the
// running Pod first (both are mutable), or sends the update without them,
// is still refused.
func TestAttackEphemeralUpdateCannotHideThePod(t *testing.T) {
	attacker := editor(t)
	ctx := context.Background()
	p := injectedPod(t, "debugged-unlabelled")
	rw := debugContainer("socket-rw", corev1.VolumeMount{Name: socketVolumeName, MountPath: "/mnt/s"})

	// The update itself without them: what reaches admission is the body,
	// though only its ephemeral containers are kept.
	var stored corev1.Pod
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(&p), &stored); err != nil {
		t.Fatal(err)
	}
	stripped := stored.DeepCopy()
	stripped.Annotations, stripped.Labels = nil, nil
	stripped.Spec.EphemeralContainers = append(stripped.Spec.EphemeralContainers, rw)
	if err := attacker.SubResource("ephemeralcontainers").Update(ctx, stripped); err == nil || !strings.Contains(err.Error(), "toolgate-socket") {
		t.Errorf("an update carrying no annotation: %v", err)
	}

	// The stored Pod without them.
	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationInject + `":null},"labels":{"` + v1alpha1.LabelInjected + `":null}}}`)
	if err := attacker.Patch(ctx, &stored, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		t.Fatalf("removing the annotation: %v", err)
	}
	if _, ok := stored.Annotations[v1alpha1.AnnotationInject]; ok {
		t.Fatal("the annotation is still there")
	}
	debugRefused(t, attacker, p, rw, `volume "toolgate-socket" is the sidecar's decision socket directory`)
}

// An ephemeral container the injector allows gets what the Pod's own
// containers got: the socket's directory read-only and TOOLGATE_URL, so a
// client run from kubectl debug asks the sidecar over the socket. Its own
// TOOLGATE_URL, or its own mount at that directory, are kept.
func TestEphemeralContainersGetTheSocketReadOnly(t *testing.T) {
	attacker := editor(t)
	p := injectedPod(t, "debugged-socket")
	plain := debugContainer("plain")
	ownURL := debugContainer("own-url")
	ownURL.Env = []corev1.EnvVar{{Name: endpoint.EnvURL, Value: "http://127.0.0.1:8181"}}
	for _, ec := range []corev1.EphemeralContainer{plain, ownURL} {
		if err := debug(t, attacker, p, ec); err != nil {
			t.Fatalf("%s: %v", ec.Name, err)
		}
	}
	for name, url := range map[string]string{"plain": "unix://" + endpoint.DefaultSocket, "own-url": "http://127.0.0.1:8181"} {
		ec := ephemeral(t, p, name)
		if ec == nil {
			t.Fatalf("%s was not added", name)
		}
		c := corev1.Container(ec.EphemeralContainerCommon)
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || (m.Name == socketVolumeName && m.ReadOnly && m.MountPath == "/var/run/toolgate")
		}
		if !mounted {
			t.Errorf("%s: mounts %+v, want %s read-only at /var/run/toolgate", name, c.VolumeMounts, socketVolumeName)
		}
		got := ""
		for _, e := range c.Env {
			if e.Name == endpoint.EnvURL {
				got = e.Value
			}
		}
		if got != url {
			t.Errorf("%s: %s=%q, want %q", name, endpoint.EnvURL, got, url)
		}
	}
}

// TestAttackSidecarImageCannotBeReplaced: a container's image is the one
// field of a running Pod's containers that may be updated, and edit may
// update Pods: a Pod author set the sidecar's image to one that answers
// allow to everything, and kubelet restarted it with the injected
// arguments. The agent's own images may still change.
func TestAttackSidecarImageCannotBeReplaced(t *testing.T) {
	attacker := testenv.Impersonate(t, restConfig, mallory, podAuthor...)
	testenv.BindEdit(t, k8sClient, ns, mallory)
	if !testenv.CanEventually(t, k8sClient, mallory, podAuthor, "patch", "", "pods", ns, "") {
		t.Fatalf("RBAC: edit does not let %s patch Pods; the test would prove nothing", mallory)
	}
	ctx := context.Background()
	p := injectedPod(t, "sidecar-image")
	var stored corev1.Pod
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(&p), &stored); err != nil {
		t.Fatal(err)
	}
	evil := stored.DeepCopy()
	sidecarOf(t, evil).Image = "evil.example/allow-everything:1"
	err := attacker.Patch(ctx, evil, client.MergeFrom(&stored))
	if err == nil || !strings.Contains(err.Error(), `spec.initContainers[0].image: Forbidden: the injected toolgate-sidecar container's image cannot change`) {
		t.Errorf("replacing the sidecar's image: %v", err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(&p), &stored); err != nil {
		t.Fatal(err)
	}
	if got := sidecarOf(t, &stored).Image; got != testInject.Image {
		t.Errorf("the sidecar runs %s", got)
	}
	agent := stored.DeepCopy()
	agent.Spec.Containers[0].Image = "python:3.13"
	if err := attacker.Patch(ctx, agent, client.MergeFrom(&stored)); err != nil {
		t.Errorf("updating the agent's image: %v", err)
	}
}
