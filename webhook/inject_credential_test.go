package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestAttackSharedProcessNamespaceIsRefused: in a Pod whose containers
// share one process namespace (or the node's), the agent's container sees
// the sidecar's process: as the sidecar's user (an image's own USER, which
// admission cannot see) or as root with CAP_SYS_PTRACE it reads the
// sidecar's environment through /proc/PID/environ and its files, the MCP
// upstream credential and the API token, through /proc/PID/root. Both Pods
// were injected and admitted.
func TestAttackSharedProcessNamespaceIsRefused(t *testing.T) {
	yes := true
	shared := pod("shares-processes", injectMe)
	shared.Spec.ShareProcessNamespace = &yes
	refused(t, shared, `spec.shareProcessNamespace: Forbidden: `, "/proc/PID/root", "MCP upstream credentials")

	host := pod("host-pid", injectMe)
	host.Spec.HostPID = true
	refused(t, host, `spec.hostPID: Forbidden: `, "/proc/PID/root")

	// Said false, it is what Pods do by default.
	no := false
	separate := pod("separate-processes", injectMe)
	separate.Spec.ShareProcessNamespace = &no
	if stored := admit(t, separate); sidecarOf(t, &stored) == nil {
		t.Error("not injected")
	}
}

// TestAttackEphemeralContainerReadingMCPCredentialIsRefused: the injector
// keeps an MCP upstream's credential Secret out of the Pod's own
// containers, but kubectl debug adds containers later, through
// pods/ephemeralcontainers: one that reads the Secret through env or
// envFrom, or mounts a volume of it the Pod declared and never mounted,
// held the credential the sidecar alone should. Each was added.
func TestAttackEphemeralContainerReadingMCPCredentialIsRefused(t *testing.T) {
	attacker := editor(t)
	p := mcpPod("debugged-credential", "github=https://mcp.example.com/;secret=gh-cred")
	p.Spec.Volumes = []corev1.Volume{{Name: "spare", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "gh-cred"}}}}
	stored := admit(t, p)
	if sidecarOf(t, &stored) == nil {
		t.Fatal("not injected")
	}

	fromEnv := debugContainer("env")
	fromEnv.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "gh-cred"}, Key: "header"}}}}
	debugRefused(t, attacker, stored, fromEnv,
		`spec.ephemeralContainers[0].env[0]: Forbidden: reads Secret "gh-cred", an MCP upstream credential`)

	fromEnvFrom := debugContainer("env-from")
	fromEnvFrom.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "gh-cred"}}}}
	debugRefused(t, attacker, stored, fromEnvFrom,
		`spec.ephemeralContainers[0].envFrom[0]: Forbidden: reads Secret "gh-cred", an MCP upstream credential`)

	fromVolume := debugContainer("volume", corev1.VolumeMount{Name: "spare", MountPath: "/stolen"})
	debugRefused(t, attacker, stored, fromVolume,
		`spec.ephemeralContainers[0].volumeMounts[0]: Forbidden: mounts Secret "gh-cred", an MCP upstream credential`)

	// Another Secret of the namespace is the debugger's business.
	other := debugContainer("other-secret")
	other.Env = []corev1.EnvVar{{Name: "DB", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "db-password"}, Key: "password"}}}}
	if err := debug(t, attacker, stored, other); err != nil {
		t.Errorf("a debug container reading another Secret: %v", err)
	}
}
