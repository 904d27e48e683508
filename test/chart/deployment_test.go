package chart

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/toolgate/toolgate/endpoint"
	"github.com/toolgate/toolgate/webhook"
)

func managerDeployment(t *testing.T, args ...string) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	d := typed[appsv1.Deployment](t, find(t, render(t, args...), "Deployment", ""))
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(d.Spec.Template.Spec.Containers))
	}
	return d, &d.Spec.Template.Spec.Containers[0]
}

func TestDeploymentIsHardened(t *testing.T) {
	t.Parallel()
	d, c := managerDeployment(t)
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod: runAsNonRoot is not true")
	}
	if pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod: seccomp profile is not RuntimeDefault")
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container has no securityContext")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities: want drop [ALL] and no add, got %+v", sc.Capabilities)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("container is privileged")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("%s: want a request no larger than a limit, got request %v limit %v", r, &req, &lim)
		}
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP probe, got %+v", name, p)
			continue
		}
		want := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[name]
		if p.HTTPGet.Path != want || p.HTTPGet.Port.StrVal != "health" {
			t.Errorf("%s probe: want %s on port health, got %s on %v", name, want, p.HTTPGet.Path, p.HTTPGet.Port.String())
		}
	}
	health, ok := flagValue(c.Args, "health-probe-bind-address")
	if port := containerPort(t, c, "health"); !ok || health != ":"+strconv.Itoa(int(port)) {
		t.Errorf("--health-probe-bind-address=%q does not serve the health port %d", health, port)
	}
}

func TestDeploymentRunsTwoLeaderElectedReplicasByDefault(t *testing.T) {
	t.Parallel()
	objs := render(t)
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ""))
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("want 2 replicas, got %v", d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Args[0] != "manager" {
		t.Errorf("first argument: want the manager subcommand, got %q", c.Args[0])
	}
	if v, _ := flagValue(c.Args, "leader-elect"); v != "true" {
		t.Errorf("--leader-elect=%q, want true", v)
	}
	if v, _ := flagValue(c.Args, "leader-election-namespace"); v != releaseNamespace {
		t.Errorf("--leader-election-namespace=%q, want %s", v, releaseNamespace)
	}
	if _, ok := flagValue(c.Args, "namespaces"); ok {
		t.Error("--namespaces is set by default: the manager would not watch every namespace")
	}
	if env := c.Env; len(env) == 0 || env[0].Name != "POD_NAMESPACE" || env[0].ValueFrom == nil ||
		env[0].ValueFrom.FieldRef == nil || env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("want POD_NAMESPACE from the downward API, got %+v", c.Env)
	}

	pdb := typed[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", ""))
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable: want 1, got %v", pdb.Spec.MinAvailable)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PDB selector %v does not select the manager pods %v (%v)", pdb.Spec.Selector, d.Spec.Template.Labels, err)
	}
}

func TestSingleReplicaHasNoDisruptionBudget(t *testing.T) {
	t.Parallel()
	// minAvailable 1 of 1 would block every node drain.
	if pdbs := all(render(t, "--set", "replicaCount=1"), "PodDisruptionBudget"); len(pdbs) != 0 {
		t.Errorf("replicaCount=1 rendered %d PodDisruptionBudgets", len(pdbs))
	}
}

func TestReplicasWithoutLeaderElectionAreRefused(t *testing.T) {
	t.Parallel()
	_, err := helmTemplate("--set", "leaderElection.enabled=false")
	if err == nil || !strings.Contains(err.Error(), "needs leaderElection.enabled") {
		t.Fatalf("2 replicas without leader election: want a refusal, got %v", err)
	}
	_, c := managerDeployment(t, "--set", "leaderElection.enabled=false", "--set", "replicaCount=1")
	if v, _ := flagValue(c.Args, "leader-elect"); v != "false" {
		t.Errorf("--leader-elect=%q, want false", v)
	}
	if _, ok := flagValue(c.Args, "leader-election-namespace"); ok {
		t.Error("--leader-election-namespace without leader election")
	}
}

func TestNonDefaultValuesReachTheDeployment(t *testing.T) {
	t.Parallel()
	d, c := managerDeployment(t, nonDefault...)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("want 3 replicas, got %v", d.Spec.Replicas)
	}
	if c.Image != "registry.example.com/platform/toolgate:v9.8.7" {
		t.Errorf("image %q", c.Image)
	}
	if v, _ := flagValue(c.Args, "namespaces"); v != "team-a,team-b" {
		t.Errorf("--namespaces=%q, want team-a,team-b", v)
	}
	if v, _ := flagValue(c.Args, "sidecar-native"); v != "false" {
		t.Errorf("--sidecar-native=%q, want false", v)
	}
	if v, _ := flagValue(c.Args, "publish-rego"); v != "true" {
		t.Errorf("--publish-rego=%q, want true (manager.publishRego)", v)
	}
	if v, _ := flagValue(c.Args, "rego-unsigned"); v != "true" {
		t.Errorf("--rego-unsigned=%q, want true (manager.regoUnsigned)", v)
	}
	if v, _ := flagValue(c.Args, "cluster-name"); v != "prod-eu-1" {
		t.Errorf("--cluster-name=%q, want prod-eu-1", v)
	}
	for flag, want := range map[string]string{"sidecar-usage-store": "redis://toolgate@redis.toolgate-system.svc:6379/2",
		"sidecar-usage-store-password-secret": "toolgate-redis"} {
		if v, _ := flagValue(c.Args, flag); v != want {
			t.Errorf("--%s=%q, want %q (usage.redis)", flag, v, want)
		}
	}
	for flag, want := range map[string]string{"sidecar-socket": "/run/agent-gate/gate.sock", "sidecar-uid": "4242", "sidecar-gid": "4343"} {
		if v, _ := flagValue(c.Args, flag); v != want {
			t.Errorf("--%s=%q, want %q", flag, v, want)
		}
	}
	want := "registry.example.com/platform/toolgate-sidecar@sha256:" + strings.Repeat("ab", 32)
	if v, _ := flagValue(c.Args, "sidecar-image"); v != want {
		t.Errorf("--sidecar-image=%q, want %q", v, want)
	}
}

func TestSidecarDefaultsToTheManagerImage(t *testing.T) {
	t.Parallel()
	_, c := managerDeployment(t, "--set", "image.tag=1.2.3")
	if v, _ := flagValue(c.Args, "sidecar-image"); v != c.Image || c.Image != "ghcr.io/toolgate/toolgate:1.2.3" {
		t.Errorf("--sidecar-image=%q, manager image %q: want both ghcr.io/toolgate/toolgate:1.2.3", v, c.Image)
	}
	if v, ok := flagValue(c.Args, "cluster-name"); ok {
		t.Errorf("--cluster-name=%q passed, yet clusterName is empty by default", v)
	}
	for _, flag := range []string{"sidecar-usage-store", "sidecar-usage-store-password-secret"} {
		if v, ok := flagValue(c.Args, flag); ok {
			t.Errorf("--%s=%q passed, yet usage.redis is empty by default", flag, v)
		}
	}
	for flag, want := range map[string]string{"sidecar-cpu-request": "10m", "sidecar-cpu-limit": "500m",
		"publish-rego": "false", "rego-unsigned": "false", "sidecar-memory": "64Mi", "sidecar-listen": "127.0.0.1:8181", "sidecar-image-pull-policy": "IfNotPresent", "sidecar-native": "true", "sidecar-metrics-port": "9191",
		"sidecar-socket": endpoint.DefaultSocket, "sidecar-uid": strconv.Itoa(webhook.DefaultSidecarUID), "sidecar-gid": strconv.Itoa(webhook.DefaultSidecarUID)} {
		if v, _ := flagValue(c.Args, flag); v != want {
			t.Errorf("--%s=%q, want the values.yaml default %q", flag, v, want)
		}
	}
}

func TestInjectionCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	objs := render(t, "--set", "sidecarInjection.enabled=false")
	if mw := all(objs, "MutatingWebhookConfiguration"); len(mw) != 0 {
		t.Errorf("injection off, yet %d MutatingWebhookConfigurations", len(mw))
	}
	c := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "")).Spec.Template.Spec.Containers[0]
	for _, f := range []string{"sidecar-image", "sidecar-cpu-request", "mutating-webhook-configuration"} {
		if _, ok := flagValue(c.Args, f); ok {
			t.Errorf("injection off, yet --%s is passed", f)
		}
	}
}
