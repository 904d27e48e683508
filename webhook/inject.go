package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/endpoint"
	"github.com/toolgate/toolgate/internal/registration"
)

// The injected container and its volumes (the annotations that drive
// injection are in api/v1alpha1).
const (
	// MetricsPortName names the sidecar's metrics port, for a PodMonitor.
	MetricsPortName  = "tg-metrics"
	SidecarName      = "toolgate-sidecar"
	cacheVolumeName  = "toolgate-bundle-cache"
	cacheMountPath   = "/var/cache/toolgate"
	socketVolumeName = "toolgate-socket"
	tokenVolumeName  = "toolgate-sidecar-token"
	tokenMountPath   = "/var/run/secrets/kubernetes.io/serviceaccount"
	// bundleReaderName names the sidecar's Role and RoleBinding; it kept
	// its first name when approvals joined the bundle read, so that
	// upgrades update the Role rather than leave a stale one behind.
	bundleReaderName = "toolgate-bundle-reader"
)

// DefaultSidecarUID is the user (and group) injected sidecars run as. It is
// their own: not root, and none of the users agent images commonly run as
// (0, 1000, 1001, 65532 of distroless "nonroot", 65534 "nobody"), so an
// agent can neither write as the sidecar nor, in a Pod that shares its
// process namespace, signal or trace it.
const DefaultSidecarUID = 64181

// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups="",resources=pods;pods/ephemeralcontainers,verbs=create;update,versions=v1,name=mpod.toolgate.dev,admissionReviewVersions=v1,reinvocationPolicy=Never,timeoutSeconds=5

// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update

// InjectOptions describe the sidecar added to annotated Pods.
type InjectOptions struct {
	Image           string
	ImagePullPolicy corev1.PullPolicy
	Resources       corev1.ResourceRequirements
	// BundleConfigMap is the operator's bundle ConfigMap name.
	BundleConfigMap string
	// Socket is the Unix socket the sidecar answers on; its directory is an
	// emptyDir only the sidecar mounts read-write (every other container
	// of the Pod mounts it read-only), so the agent cannot replace the
	// socket. Empty: no socket.
	Socket string
	// Listen is where the sidecar also answers, on the Pod's loopback, for
	// clients that cannot use a socket. Empty: no TCP listener.
	Listen string
	// RunAsUser and RunAsGroup are the sidecar's own user and group
	// (DefaultSidecarUID): not root, and not the agent's.
	RunAsUser, RunAsGroup int64
	// Native runs the sidecar as a restartable init container (Kubernetes
	// 1.29+): it starts, and is listening, before the agent's containers,
	// and it stops after them. Otherwise it is appended to the containers.
	Native bool
	// ClusterName, when set, labels every decision log line of injected
	// sidecars (with their namespace and pod, which are always there).
	ClusterName string
	// MetricsPort, when not 0, is where the sidecar also serves /metrics
	// (and health) on the Pod's IP, as the port named MetricsPortName.
	MetricsPort int32
	// TrustedKeysPEM, when set, returns the operator's public signing keys
	// at each admission, put into the sidecar's arguments
	// (--trusted-keys-pem): a Pod's containers cannot be changed after
	// creation, and nothing in the agent's namespace (a ConfigMap its
	// editors could rewrite) is trusted. A key promoted later reaches the
	// sidecar through its endorsement (bundle.EndorsementsKey).
	TrustedKeysPEM func() string
	// ReportsURL, when set, is the operator's reports endpoint: the
	// sidecar also sends its decision log there, with a ServiceAccount
	// token for v1alpha1.ReportsAudience only (reportsTokenVolume).
	ReportsURL string
	// UsageStore, when set, is the shared usage store every injected
	// sidecar counts limits with store: shared in (--usage-store, with
	// --cluster-name from ClusterName); UsageStorePasswordSecret, a Secret
	// in the Pod's namespace whose key password is mounted into the
	// sidecar alone (injectUsageStore).
	UsageStore               string
	UsageStorePasswordSecret string
}

// SidecarBinary is where the Dockerfile puts the one toolgate binary; the
// exec probes call it because the sidecar's loopback listener is out of
// reach of kubelet's HTTP probes.
const SidecarBinary = "/toolgate"

// PodInjector adds the toolgate sidecar to Pods annotated
// toolgate.dev/inject: "true", and grants their service account read access
// to that one bundle ConfigMap.
type PodInjector struct {
	Client  client.Client
	Options InjectOptions
}

var _ admission.Defaulter[*corev1.Pod] = &PodInjector{}

// SetupPodInjector registers the mutating webhook.
func SetupPodInjector(mgr ctrl.Manager, o InjectOptions) error {
	if o.Image == "" {
		return errors.New("sidecar injection needs a sidecar image")
	}
	// A direct client: reading Roles through the manager's cache would need
	// list/watch on every Role in the cluster.
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &corev1.Pod{}).
		WithDefaulter(&PodInjector{Client: c, Options: o}).
		WithDefaulterCustomPath("/mutate-v1-pod").
		Complete()
}

// Default implements admission.Defaulter: it leaves Pods without the
// annotation alone, and refuses an annotated Pod that already declares the
// sidecar or its volumes (refuseInjection) rather than skipping it. An
// update of an injected Pod, or of its ephemeral containers (kubectl
// debug), it guards instead (admitUpdate).
func (p *PodInjector) Default(ctx context.Context, pod *corev1.Pod) error {
	req, reqErr := admission.RequestFromContext(ctx)
	if reqErr == nil && req.Operation == admissionv1.Update {
		return admitUpdate(req, pod, p.Options.RunAsUser)
	}
	if pod.Annotations[v1alpha1.AnnotationInject] != "true" {
		return nil
	}
	if err := refuseInjection(pod, p.Options.RunAsUser); err != nil {
		return err
	}
	namespace := pod.Namespace
	if reqErr == nil {
		// On create the Pod may not carry its namespace yet; the request does.
		namespace = req.Namespace
	}
	var id *registered
	if namespace != "" {
		reg, err := registration.Read(ctx, p.Client, namespace)
		if err != nil {
			return err
		}
		if reg.Registered() {
			if id, err = resolveRegistered(pod, namespace, reg); err != nil {
				return err
			}
		}
	}
	if id != nil {
		if err := podInvalid(pod, refuseCredentialReaders(pod, id.upstreams)); err != nil {
			return err
		}
	} else if err := refuseMCP(pod); err != nil {
		return err
	}
	if reqErr == nil && (req.DryRun == nil || !*req.DryRun) {
		if err := p.grantSidecarRole(ctx, namespace, serviceAccount(pod)); err != nil {
			return fmt.Errorf("granting %s the sidecar's access (bundle, freezes, approvals): %w", serviceAccount(pod), err)
		}
	}
	injectSidecar(pod, p.Options, id)
	return nil
}

// InjectSidecar adds the sidecar container, its cache volume and the
// v1alpha1.LabelInjected label to pod, once, for a namespace that does not
// register its agents (the Pod's annotations say who it is).
func InjectSidecar(pod *corev1.Pod, o InjectOptions) { injectSidecar(pod, o, nil) }

// injectSidecar is InjectSidecar with, in a namespace that registers its
// agents, the Pod's registered identity (id; nil: the annotations).
func injectSidecar(pod *corev1.Pod, o InjectOptions, id *registered) {
	if hasSidecar(pod) {
		return
	}
	agentID := corev1.EnvVar{Name: "TOOLGATE_AGENT_ID",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}}
	switch {
	case id != nil:
		agentID = corev1.EnvVar{Name: "TOOLGATE_AGENT_ID", Value: id.agent.ID}
	case pod.Annotations[v1alpha1.AnnotationAgentID] != "":
		agentID = corev1.EnvVar{Name: "TOOLGATE_AGENT_ID", Value: pod.Annotations[v1alpha1.AnnotationAgentID]}
	}
	f, t := false, true
	uid, gid := o.RunAsUser, o.RunAsGroup
	c := corev1.Container{
		Name:            SidecarName,
		Image:           o.Image,
		ImagePullPolicy: o.ImagePullPolicy,
		Args: []string{"sidecar",
			"--configmap=$(POD_NAMESPACE)/" + o.BundleConfigMap,
			"--agent-id=$(TOOLGATE_AGENT_ID)",
			// A FrozenAgent may name the service account; the agent cannot
			// change a container's args once the Pod exists.
			"--service-account=" + serviceAccount(pod),
			// The Lease reporting what it serves, named after and owned by the Pod.
			"--lease-pod=$(POD_NAME)", "--lease-pod-uid=$(POD_UID)"},
		Env: []corev1.EnvVar{
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
			agentID,
		},
		Resources:    o.Resources,
		VolumeMounts: []corev1.VolumeMount{{Name: cacheVolumeName, MountPath: cacheMountPath}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: &t, RunAsUser: &uid, RunAsGroup: &gid, ReadOnlyRootFilesystem: &t, AllowPrivilegeEscalation: &f,
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	if id != nil {
		// What the sidecar binds comes from the signed bundle's Agent; the
		// arguments say the same, for its logs. The Pod's annotations are
		// ignored: its author does not choose its roles or environment.
		c.Args = append(c.Args, "--roles="+strings.Join(id.agent.Roles, ","))
		if id.environment != "" {
			c.Args = append(c.Args, "--environment="+id.environment)
		}
	} else {
		// refuseInjection has checked both: they go into args as they are.
		if roles, ok := pod.Annotations[v1alpha1.AnnotationRoles]; ok {
			c.Args = append(c.Args, "--roles="+roles)
		}
		if env, ok := pod.Annotations[v1alpha1.AnnotationEnvironment]; ok {
			c.Args = append(c.Args, "--environment="+env)
		}
	}
	if o.Socket != "" {
		c.Args = append(c.Args, "--listen="+endpoint.UnixURL(o.Socket))
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: socketVolumeName, MountPath: path.Dir(o.Socket)})
	}
	if o.Listen != "" {
		c.Args = append(c.Args, "--listen="+o.Listen)
	}
	c.Args = append(c.Args, "--cache-dir="+cacheMountPath,
		// The counters behind rate limits survive a restart of the
		// sidecar in its own volume, which no other container mounts.
		"--usage-state="+path.Join(cacheMountPath, "usage"),
		// The pod's name comes from the downward API: with generateName
		// it is not known yet at admission.
		"--decision-log-label=namespace=$(POD_NAMESPACE)",
		"--decision-log-label=pod=$(POD_NAME)")
	// Startup gates the agent's containers (native mode) on the sidecar
	// listening; readiness keeps the Pod unready while no bundle is
	// loaded, when every call would be denied NO_POLICIES. They ask over
	// the socket when there is one: what the agent will use.
	probeAt := o.Listen
	if o.Socket != "" {
		probeAt = endpoint.UnixURL(o.Socket)
	}
	c.StartupProbe = probe(probeAt, "alive", 1, 60)
	c.ReadinessProbe = probe(probeAt, "ready", 5, 1)
	c.LivenessProbe = probe(probeAt, "alive", 10, 3)
	if o.ClusterName != "" {
		c.Args = append(c.Args, "--decision-log-label=cluster="+o.ClusterName)
	}
	if o.TrustedKeysPEM != nil {
		if keys := o.TrustedKeysPEM(); keys != "" {
			c.Args = append(c.Args, "--trusted-keys-pem="+keys)
		}
	}
	if o.ReportsURL != "" {
		injectReports(pod, &c, o.ReportsURL)
	}
	if o.MetricsPort != 0 {
		c.Args = append(c.Args, fmt.Sprintf("--metrics-listen=:%d", o.MetricsPort))
		c.Ports = []corev1.ContainerPort{{Name: MetricsPortName, ContainerPort: o.MetricsPort, Protocol: corev1.ProtocolTCP}}
	}
	injectUsageStore(pod, &c, o)
	if v, ok := pod.Annotations[AnnotationMCPUpstreams]; ok && id != nil {
		injectMCP(pod, &c, id.upstreams)
	} else if ok {
		ups, _ := parseMCPUpstreams(v) // refuseMCP has checked it
		injectMCP(pod, &c, ups)
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[v1alpha1.LabelInjected] = "true"
	// The sidecar watches its bundle through the API, so it needs a token
	// where client-go's in-cluster config looks. The ServiceAccount
	// admission plugin runs before webhooks and mounted one only into the
	// containers there were: reuse that volume. A Pod that mounts none (a
	// hardened agent: automountServiceAccountToken false) gets one for the
	// sidecar alone; its own containers stay without.
	if mount, ok := tokenMount(pod); ok {
		c.VolumeMounts = append(c.VolumeMounts, mount)
	} else {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: tokenVolumeName, MountPath: tokenMountPath, ReadOnly: true})
		pod.Spec.Volumes = append(pod.Spec.Volumes, sidecarTokenVolume())
	}
	if o.Native {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
		// First, so init containers after it can already ask for decisions.
		pod.Spec.InitContainers = append([]corev1.Container{c}, pod.Spec.InitContainers...)
	} else {
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: cacheVolumeName,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if o.Socket != "" {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: socketVolumeName,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	shareSocket(pod, o)
}

// shareSocket mounts the socket's directory read-only into every other
// container and init container (kubelet makes an emptyDir 0777: the
// read-only mount is what keeps the agent from replacing the socket), and
// points TOOLGATE_URL at the sidecar (pointAtSidecar). Ephemeral
// containers, added after admission, get the same from admitEphemeral.
func shareSocket(pod *corev1.Pod, o InjectOptions) {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name != SidecarName {
				pointAtSidecar(&list[i], o.Socket, o.Listen)
			}
		}
	}
}

// pointAtSidecar mounts the directory of socket read-only into c and sets
// TOOLGATE_URL to it where c does not set it. A container that already
// mounts something at that directory, or inside it, keeps its own mounts
// and gets the TCP address listen instead, when there is one. A
// TOOLGATE_URL in a container's env wins; one from envFrom does not
// (Kubernetes lets env override envFrom), so set it in env.
func pointAtSidecar(c *corev1.Container, socket, listen string) {
	url := ""
	if listen != "" {
		url = "http://" + loopback(listen)
	}
	if socket != "" && !mountsAt(c, path.Dir(socket)) {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: socketVolumeName, MountPath: path.Dir(socket), ReadOnly: true})
		url = endpoint.UnixURL(socket)
	}
	if url != "" && !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == endpoint.EnvURL }) {
		c.Env = append(c.Env, corev1.EnvVar{Name: endpoint.EnvURL, Value: url})
	}
}

// mountsAt tells whether c mounts anything at dir or inside it.
func mountsAt(c *corev1.Container, dir string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		p := path.Clean(m.MountPath)
		return p == dir || strings.HasPrefix(p, dir+"/")
	})
}

// loopback is the address a client in the Pod dials for listen: a
// wildcard host answers on 127.0.0.1.
func loopback(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
		return listen
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// tokenMount finds the API token mount the ServiceAccount admission plugin
// gave the Pod's containers: a mount at the token path of a projected
// volume with a service account token, which no container can write. Any
// other volume there (an emptyDir the agent mounted at that path) is the
// agent's, and would let it rewrite the sidecar's credentials.
func tokenMount(pod *corev1.Pod) (corev1.VolumeMount, bool) {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			for _, m := range c.VolumeMounts {
				if m.MountPath == tokenMountPath && projectsServiceAccountToken(pod, m.Name) {
					return corev1.VolumeMount{Name: m.Name, MountPath: tokenMountPath, ReadOnly: true}, true
				}
			}
		}
	}
	return corev1.VolumeMount{}, false
}

func projectsServiceAccountToken(pod *corev1.Pod, volume string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == volume && v.Projected != nil {
			return slices.ContainsFunc(v.Projected.Sources, func(p corev1.VolumeProjection) bool { return p.ServiceAccountToken != nil })
		}
	}
	return false
}

// sidecarTokenVolume is what kubelet mounts for an automounted token: a
// short-lived, audience-bound token, the cluster CA and the namespace.
func sidecarTokenVolume() corev1.Volume {
	expiry := int64(3607)
	return corev1.Volume{Name: tokenVolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}}
}

func hasSidecar(pod *corev1.Pod) bool { return sidecarIn(pod) != nil }

// sidecarIn is pod's toolgate-sidecar container, nil without one.
func sidecarIn(pod *corev1.Pod) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == SidecarName {
				return &list[i]
			}
		}
	}
	return nil
}

// probe runs `toolgate sidecar probe` inside the sidecar container, with
// its own timeout under kubelet's.
func probe(listen, which string, periodSeconds, failureThreshold int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{SidecarBinary, "sidecar", "probe", which, "--listen=" + listen, "--timeout=1s"}}},
		PeriodSeconds: periodSeconds, TimeoutSeconds: 2, FailureThreshold: failureThreshold,
	}
}

func serviceAccount(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

// SidecarRoleRules is what an injected sidecar's ServiceAccount may do in
// its namespace, and nothing else: read the bundle ConfigMap (named
// bundleConfigMap) and its parts when it is chunked, the FrozenAgents, ask
// for approvals, and write its Lease. The manager
// must itself hold every rule (RBAC escalation prevention), which
// controllers/setup.go's markers and the chart's rules give it.
func SidecarRoleRules(bundleConfigMap string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{bundleConfigMap}, Verbs: []string{"get", "list", "watch"}},
		// A chunked bundle's parts (bundle.PartNames): read with a get
		// each when the index in the bundle ConfigMap changes, never
		// watched, so get alone.
		{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: bundle.PartNames(bundleConfigMap), Verbs: []string{"get"}},
		// The sidecar applies FrozenAgents straight from the API, so
		// the kill switch does not wait for the operator.
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"frozenagents"}, Verbs: []string{"get", "list", "watch"}},
		// A call an ask rule holds becomes an ApprovalRequest the sidecar
		// creates and watches; the status write is for consumedAt only
		// (the approvals admission policy refuses it any other field, and
		// any decision): no delete, no patch of spec.
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"approvalrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"approvalrequests/status"}, Verbs: []string{"update"}},
		// A pinned MCP upstream's tool that drifted is a Warning Event on
		// its MCPUpstream, written by the sidecar that listed it
		// (docs/pinning.md): create only, never read or change one.
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		// Its Lease, reporting what it serves: RBAC cannot name a Lease
		// not yet created, so the sidecar Lease admission policy keeps
		// each sidecar to its own Pod's. No list, watch or delete.
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}
}

// grantSidecarRole binds the service account to the namespace's sidecar
// Role (SidecarRoleRules), creating or updating the Role.
func (p *PodInjector) grantSidecarRole(ctx context.Context, namespace, sa string) error {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: bundleReaderName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, p.Client, role, func() error {
		role.Labels = map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}
		role.Rules = SidecarRoleRules(p.Options.BundleConfigMap)
		return nil
	}); err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: bundleReaderName}}
	_, err := controllerutil.CreateOrUpdate(ctx, p.Client, binding, func() error {
		binding.Labels = map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: bundleReaderName}
		subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: namespace}
		for _, s := range binding.Subjects {
			if s == subject {
				return nil
			}
		}
		binding.Subjects = append(binding.Subjects, subject)
		return nil
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("concurrent update of %s/%s, the pod may be retried: %w", namespace, bundleReaderName, err)
	}
	return err
}
