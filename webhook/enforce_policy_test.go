package webhook

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// enforceNamespace creates the namespace name, labelled
// toolgate.dev/enforce=true and toolgate.dev/environment=prod, where an
// admin registered agent-sa (Agent "agent", roles ci and analyst:eu,
// upstreams github, with a credential Secret, and files, without), and
// installs the shipped enforce policy for the suite's injector.
func enforceNamespace(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{v1alpha1.LabelEnforce: "true", v1alpha1.LabelEnvironment: "prod"}}},
		&v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "agent"}, Spec: v1alpha1.AgentSpec{
			ServiceAccountName: "agent-sa", Roles: []string{"ci", "analyst:eu"}, Upstreams: []string{"github", "files"}}},
		&v1alpha1.MCPUpstream{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "github"}, Spec: v1alpha1.MCPUpstreamSpec{
			URL: "https://mcp.example.com/mcp", CredentialSecretRef: &v1alpha1.SecretKeyRef{Name: "gh-cred", Key: "header"}}},
		&v1alpha1.MCPUpstream{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "files"}, Spec: v1alpha1.MCPUpstreamSpec{
			URL: "http://files.tools.svc:8080/mcp"}},
	}
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	vap, binding := enforcePolicy(t, testInject)
	installEnforcePolicy(t, vap, binding, name)
}

// injectedDryRun is what the injector writes for p: p created through c in
// a dry run (the injector grants no RoleBinding then), as the API server
// would store it, every admission plugin, the injector and the enforce
// policy included.
func injectedDryRun(t *testing.T, c client.Client, p *corev1.Pod) corev1.Pod {
	t.Helper()
	if err := c.Create(context.Background(), p, client.DryRunAll); err != nil {
		t.Fatalf("the injector up, a dry run of %s: %v", p.Name, err)
	}
	if sidecarOf(t, p) == nil {
		t.Fatalf("the injector up, %s was not injected", p.Name)
	}
	return *p
}

// replay is p as its author re-applies it under another name (kubectl get
// -o yaml, then kubectl apply): the labels, annotations and spec the API
// server stored.
func replay(p *corev1.Pod, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name,
		Labels: maps.Clone(p.Labels), Annotations: maps.Clone(p.Annotations)}, Spec: *p.Spec.DeepCopy()}
}

// refusedAs creates p as c and wants it refused with every one of msgs in
// the error, and not stored.
func refusedAs(t *testing.T, c client.Client, p *corev1.Pod, msgs ...string) {
	t.Helper()
	err := c.Create(context.Background(), p)
	if err == nil {
		t.Fatalf("pod %s/%s was admitted", p.Namespace, p.Name)
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

// setArg replaces the argument of c starting with prefix by arg ("" removes
// it), and fails the test if there is none.
func setArg(t *testing.T, c *corev1.Container, prefix, arg string) {
	t.Helper()
	i := slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, prefix) })
	if i < 0 {
		t.Fatalf("the injected sidecar has no argument %s...: %q", prefix, c.Args)
	}
	if arg == "" {
		c.Args = slices.Delete(c.Args, i, i+1)
	} else {
		c.Args[i] = arg
	}
}

func secretEnv(name, secret string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "header"}}}
}

// The messages of the enforce policy's validations.
const (
	notInjected        = "the toolgate-sidecar container is not the injected one"
	refusedContainer   = notInjected + ": its image, command"
	refusedArgs        = notInjected + ": its arguments differ"
	refusedEnv         = notInjected + ": its env differs"
	refusedMounts      = notInjected + ": its mounts or their volumes differ"
	refusedSecurity    = notInjected + ": its securityContext differs"
	refusedOthers      = "the Pod's other containers may not mount the toolgate sidecar's volumes"
	refusedProcesses   = "a Pod may not share its process namespace"
	refusedDebugReader = "read an MCP upstream credential Secret"
)

// TestAttackHandWrittenSidecarRefusedInEnforceNamespace: while the
// injector is down (its webhook fails open), a Pod author with the
// built-in edit role (mallory, impersonated, real RBAC) writes the sidecar
// into her Pod herself, in an enforce namespace. The policy checked it
// loosely: a repeated flag passed (the sidecar's last one wins),
// --configmap was a prefix before a variable, --trusted-keys-pem was not
// required, env, mounts, volumes, securityContext, hooks and probes were
// not read, nor the Pod's other containers or process namespace; every
// variation below was admitted. Now only what the injector writes is: a
// Pod it wrote (created as mallory with it up, in a dry run) is admitted
// when replayed with it down, and each variation of that Pod is refused.
func TestAttackHandWrittenSidecarRefusedInEnforceNamespace(t *testing.T) {
	const enforced = "enforce-substance"
	ctx := context.Background()
	enforceNamespace(t, enforced)
	attacker := editorIn(t, enforced)
	if !testenv.CanEventually(t, k8sClient, mallory, podAuthor, "create", "", "pods", enforced, "") {
		t.Fatalf("RBAC: edit does not let %s create Pods in %s; the test would prove nothing", mallory, enforced)
	}
	upstreams := map[string]string{v1alpha1.AnnotationInject: "true", AnnotationMCPUpstreams: "github,files"}
	agent := pod("agent", upstreams)
	agent.Namespace = enforced
	injected := injectedDryRun(t, attacker, agent)
	// Where the ServiceAccount admission plugin mounted the Pod's token
	// (envtest runs without it: played here as it writes it), the sidecar
	// mounts that volume rather than one of its own.
	reuse := pod("reuses-token", upstreams)
	reuse.Namespace = enforced
	reuse.Spec.Volumes = []corev1.Volume{sidecarTokenVolume()}
	reuse.Spec.Volumes[0].Name = "kube-api-access-x7k2q"
	reuse.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-x7k2q", MountPath: tokenMountPath, ReadOnly: true}}
	reused := injectedDryRun(t, attacker, reuse)
	if !slices.ContainsFunc(sidecarOf(t, &reused).VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "kube-api-access-x7k2q" }) {
		t.Fatalf("the sidecar does not reuse the Pod's token: %+v", sidecarOf(t, &reused).VolumeMounts)
	}

	setInjectorURL(t, "https://127.0.0.1:1/mutate-v1-pod")
	replayed := replay(&injected, "replayed")
	for _, p := range []*corev1.Pod{replayed, replay(&reused, "replayed-token")} {
		if err := attacker.Create(ctx, p); err != nil {
			t.Fatalf("a Pod the injector wrote, replayed while it is down: %v", err)
		}
	}

	uid, root := int64(DefaultSidecarUID), int64(0)
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod, c *corev1.Container)
		want   string
	}{
		{"repeated-service-account", func(_ *corev1.Pod, c *corev1.Container) {
			c.Args = append(c.Args, "--service-account=default")
		}, refusedArgs},
		// Kubelet expands $(POD_NAME): a Pod named after another
		// namespace would watch that namespace's bundle.
		{"configmap-through-a-variable", func(_ *corev1.Pod, c *corev1.Container) {
			setArg(t, c, "--configmap=", "--configmap=$(POD_NAME)/toolgate-bundle")
		}, refusedArgs},
		{"pod-namespace-written-out", func(_ *corev1.Pod, c *corev1.Container) {
			c.Env[0] = corev1.EnvVar{Name: "POD_NAMESPACE", Value: "open-team"}
		}, refusedEnv},
		{"no-trusted-keys", func(_ *corev1.Pod, c *corev1.Container) { setArg(t, c, "--trusted-keys-pem=", "") }, refusedArgs},
		{"bundle-file", func(_ *corev1.Pod, c *corev1.Container) {
			c.Args = append(c.Args, "--bundle-file=/allow-everything.json")
		}, refusedArgs},
		{"kubeconfig-flag", func(_ *corev1.Pod, c *corev1.Container) {
			c.Args = append(c.Args, "--kubeconfig=/var/cache/toolgate/kubeconfig")
		}, refusedArgs},
		// One counter: every rate limit forgotten at the next call.
		{"usage-max-keys", func(_ *corev1.Pod, c *corev1.Container) { c.Args = append(c.Args, "--usage-max-keys=1") }, refusedArgs},
		{"roles-through-a-variable", func(_ *corev1.Pod, c *corev1.Container) { setArg(t, c, "--roles=", "--roles=$(POD_NAME)") }, refusedArgs},
		{"upstream-through-a-variable", func(_ *corev1.Pod, c *corev1.Container) {
			setArg(t, c, "--mcp-upstream=github=", "--mcp-upstream=github=https://$(POD_NAME)/mcp")
		}, refusedArgs},
		{"kubeconfig-env", func(_ *corev1.Pod, c *corev1.Container) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "KUBECONFIG", Value: "/var/cache/toolgate/kubeconfig"})
		}, refusedEnv},
		{"env-from", func(_ *corev1.Pod, c *corev1.Container) {
			c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sidecar-env"}}}}
		}, refusedEnv},
		{"extra-mount", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "extra", MountPath: "/etc/toolgate"})
		}, refusedMounts},
		{"cache-on-the-node", func(p *corev1.Pod, _ *corev1.Container) {
			for i := range p.Spec.Volumes {
				if p.Spec.Volumes[i].Name == cacheVolumeName {
					p.Spec.Volumes[i].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/planted"}}
				}
			}
		}, refusedMounts},
		// A token Secret of another ServiceAccount, which edit may create:
		// the sidecar would be that account's agent.
		{"another-service-accounts-token", func(p *corev1.Pod, _ *corev1.Container) {
			for i := range p.Spec.Volumes {
				if p.Spec.Volumes[i].Name == tokenVolumeName {
					p.Spec.Volumes[i].VolumeSource = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "other-sa-token"}}
				}
			}
		}, refusedMounts},
		{"run-as-root", func(_ *corev1.Pod, c *corev1.Container) {
			no := false
			c.SecurityContext.RunAsUser, c.SecurityContext.RunAsNonRoot = &root, &no
		}, refusedSecurity},
		{"keeps-capabilities", func(_ *corev1.Pod, c *corev1.Container) {
			c.SecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"SYS_PTRACE"}}
		}, refusedSecurity},
		{"command-override", func(_ *corev1.Pod, c *corev1.Container) { c.Command = []string{SidecarBinary} }, refusedContainer},
		// A hook or a probe runs its command in the sidecar's container,
		// as its user, beside it: another sidecar on the socket.
		{"post-start-hook", func(_ *corev1.Pod, c *corev1.Container) {
			c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
				Command: []string{SidecarBinary, "sidecar", "--bundle-file=/allow-everything.json", "--listen=unix:///var/run/toolgate/toolgate.sock"}}}}
		}, refusedContainer},
		{"probe-runs-another-sidecar", func(_ *corev1.Pod, c *corev1.Container) {
			c.LivenessProbe.Exec.Command = []string{SidecarBinary, "sidecar", "--bundle-file=/allow-everything.json"}
		}, refusedContainer},
		{"agent-socket-writable", func(p *corev1.Pod, _ *corev1.Container) {
			for i, m := range p.Spec.Containers[0].VolumeMounts {
				if m.Name == socketVolumeName {
					p.Spec.Containers[0].VolumeMounts[i].ReadOnly = false
				}
			}
		}, refusedOthers},
		{"agent-reads-the-credential", func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, secretEnv("TOKEN", "gh-cred"))
		}, refusedOthers},
		{"agent-as-the-sidecars-user", func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
		}, refusedOthers},
		{"shared-process-namespace", func(p *corev1.Pod, _ *corev1.Container) {
			yes := true
			p.Spec.ShareProcessNamespace = &yes
		}, refusedProcesses},
		{"host-pid", func(p *corev1.Pod, _ *corev1.Container) { p.Spec.HostPID = true }, refusedProcesses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := replay(&injected, tc.name)
			tc.change(p, sidecarOf(t, p))
			refusedAs(t, attacker, p, tc.want, "toolgate.dev/enforce=true")
		})
	}

	// kubectl debug while the injector is down: the credential stays the
	// sidecar's.
	for _, ec := range []corev1.EphemeralContainer{
		func() corev1.EphemeralContainer {
			ec := debugContainer("reads-credential")
			ec.Env = []corev1.EnvVar{secretEnv("TOKEN", "gh-cred")}
			return ec
		}(),
		func() corev1.EphemeralContainer {
			ec := debugContainer("reads-credential-from")
			ec.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gh-cred"}}}}
			return ec
		}(),
		debugContainer("mounts-credential", corev1.VolumeMount{Name: mcpVolumePrefix + "github", MountPath: "/stolen", ReadOnly: true}),
	} {
		debugRefused(t, attacker, *replayed, ec, refusedDebugReader)
	}
	if err := debug(t, attacker, *replayed, debugContainer("plain")); err != nil {
		t.Errorf("an ordinary debug container while the injector is down: %v", err)
	}
}

// TestEnforcePolicyAdmitsWhatEachConfigurationInjects: the policy's
// installation variables are the manager's injection options (the chart
// fills them from the same values, test/chart checks): for managers that
// inject a plain container, answer on TCP alone or on the socket alone,
// serve no metrics port, name no cluster, pull always or run the sidecar
// as another user, the Pod their injector writes (injectSidecar, the
// webhook's own code, for a registered agent with an upstream) is admitted
// while the injector is down, and the suite's manager's Pod is refused.
func TestEnforcePolicyAdmitsWhatEachConfigurationInjects(t *testing.T) {
	ctx := context.Background()
	tcpOnly, socketOnly := testInject, testInject
	tcpOnly.Native, tcpOnly.Socket, tcpOnly.MetricsPort, tcpOnly.ClusterName = false, "", 0, ""
	tcpOnly.ImagePullPolicy, tcpOnly.BundleConfigMap = corev1.PullAlways, "agents-bundle"
	socketOnly.Listen, socketOnly.RunAsUser, socketOnly.RunAsGroup, socketOnly.Socket = "", 70000, 70001, "/run/tg/decisions.sock"
	id := &registered{agent: engine.Agent{Name: "agent", ServiceAccount: "agent-sa", ID: "agent", Roles: []string{}, Upstreams: []string{"github"}},
		upstreams: []mcpAnnotated{{name: "github", url: "https://mcp.example.com/mcp", secret: "gh-cred", key: "header"}}}
	// A manager whose sidecars count shared limits in Redis, with a
	// password Secret mounted into the sidecar alone.
	usageStore := testInject
	usageStore.UsageStore, usageStore.UsageStorePasswordSecret = "redis://redis.toolgate-system.svc:6379/0", "toolgate-redis"
	configs := map[string]InjectOptions{"tcp-only": tcpOnly, "socket-only": socketOnly, "usage-store": usageStore}
	for name, o := range configs {
		// Beside the shipped policy, as another installation's: its own
		// name and namespaces.
		vap, binding := enforcePolicy(t, o)
		vap.Name, binding.Name, binding.Spec.PolicyName = "enforce-"+name, "enforce-"+name, "enforce-"+name
		label := "toolgate.test/enforce-" + name
		vap.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}}
		if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "enforce-" + name,
			Labels: map[string]string{label: "true"}}}); err != nil {
			t.Fatal(err)
		}
		installEnforcePolicy(t, vap, binding, "enforce-"+name)
	}
	setInjectorURL(t, "https://127.0.0.1:1/mutate-v1-pod")
	for name, o := range configs {
		t.Run(name, func(t *testing.T) {
			injected := func(pod *corev1.Pod, o InjectOptions) *corev1.Pod {
				pod.Namespace = "enforce-" + name
				injectSidecar(pod, o, id)
				return pod
			}
			upstream := map[string]string{v1alpha1.AnnotationInject: "true", AnnotationMCPUpstreams: "github"}
			if err := k8sClient.Create(ctx, injected(pod("injected", upstream), o)); err != nil {
				t.Errorf("what the injector writes with these options: %v", err)
			}
			refusedAs(t, k8sClient, injected(pod("injected-for-another-manager", upstream), testInject), notInjected)
			if o.UsageStore == "" {
				return
			}
			// The agent may not read the sidecar's store password, nor
			// point the sidecar at another Secret.
			thief := injected(pod("usage-store-thief", upstream), o)
			thief.Spec.Containers[0].VolumeMounts = append(thief.Spec.Containers[0].VolumeMounts,
				corev1.VolumeMount{Name: usageStoreVolumeName, MountPath: "/stolen", ReadOnly: true})
			if err := k8sClient.Create(ctx, thief); err == nil {
				t.Error("an agent container mounting the usage store password was admitted")
			}
			other := injected(pod("usage-store-other-secret", upstream), o)
			for i := range other.Spec.Volumes {
				if other.Spec.Volumes[i].Name == usageStoreVolumeName {
					other.Spec.Volumes[i].Secret.SecretName = "someone-elses"
				}
			}
			if err := k8sClient.Create(ctx, other); err == nil {
				t.Error("a sidecar reading its usage store password from another Secret was admitted")
			}
		})
	}
}

// TestEnforcePolicyCompilesForKubernetes130: the chart supports Kubernetes
// 1.30, whose API server refuses a policy using CEL it does not have (two-
// variable comprehensions, lists.range, ...): every expression of the
// shipped policy compiles in 1.30's environment, as the API server
// compiles a new policy.
func TestEnforcePolicyCompilesForKubernetes130(t *testing.T) {
	vap, _ := enforcePolicy(t, testInject)
	for _, e := range compileEnforcePolicy(t, vap, 1, 30) {
		t.Error(e)
	}
	// The test can fail: a function of Kubernetes 1.32 does not compile.
	vap.Spec.Validations[0].Expression = "['a'].all(i, v, v == 'a')"
	if errs := compileEnforcePolicy(t, vap, 1, 30); len(errs) != 1 {
		t.Errorf("a two-variable comprehension compiled for 1.30: %v", errs)
	}
}
