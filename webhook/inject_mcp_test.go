package webhook

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

func mcpPod(name, upstreams string) *corev1.Pod {
	return pod(name, map[string]string{v1alpha1.AnnotationInject: "true", AnnotationMCPUpstreams: upstreams})
}

// TestInjectsMCPUpstreams: the annotation becomes sidecar flags, and each
// upstream's Secret is mounted into the sidecar and nowhere else.
func TestInjectsMCPUpstreams(t *testing.T) {
	stored := admit(t, mcpPod("mcp-agent", "github=https://api.githubcopilot.com/mcp/;secret=github-mcp-token, files=http://files.tools.svc:8080/mcp , pay=https://pay.example.com/mcp;secret=pay-cred/auth"))
	c := sidecarOf(t, &stored)
	if c == nil {
		t.Fatal("no sidecar")
	}
	for _, want := range []string{
		"--mcp-upstream=github=https://api.githubcopilot.com/mcp/",
		"--mcp-upstream-auth=github=/var/run/secrets/toolgate-mcp/github/header",
		"--mcp-upstream=files=http://files.tools.svc:8080/mcp",
		"--mcp-upstream=pay=https://pay.example.com/mcp",
		"--mcp-upstream-auth=pay=/var/run/secrets/toolgate-mcp/pay/header",
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("sidecar args %q lack %q", c.Args, want)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--mcp-upstream-auth=files") }) {
		t.Errorf("files has no secret but got a credential flag: %q", c.Args)
	}
	secrets := map[string]corev1.Volume{}
	for _, v := range stored.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v
		}
	}
	gh, ok := secrets["toolgate-mcp-github"]
	if !ok || gh.Secret.SecretName != "github-mcp-token" || len(gh.Secret.Items) != 1 || gh.Secret.Items[0].Key != "header" {
		t.Fatalf("github's Secret volume: %+v", gh)
	}
	if p := secrets["toolgate-mcp-pay"]; p.Secret == nil || p.Secret.SecretName != "pay-cred" || p.Secret.Items[0].Key != "auth" {
		t.Fatalf("pay's Secret volume: %+v", p)
	}
	mounted := func(c corev1.Container, vol string) bool {
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == vol })
	}
	if !mounted(*c, "toolgate-mcp-github") || !mounted(*c, "toolgate-mcp-pay") {
		t.Fatalf("the sidecar does not mount the credentials: %+v", c.VolumeMounts)
	}
	agent := stored.Spec.Containers[0]
	if !slices.Contains(agent.Env, corev1.EnvVar{Name: EnvMCPURL, Value: "http://127.0.0.1:8182/mcp/"}) {
		t.Errorf("the agent container is not pointed at the proxy: %+v", agent.Env)
	}
	if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == EnvMCPURL }) {
		t.Errorf("the sidecar got %s", EnvMCPURL)
	}
	for _, other := range append(append([]corev1.Container{}, stored.Spec.Containers...), stored.Spec.InitContainers...) {
		if other.Name != SidecarName && (mounted(other, "toolgate-mcp-github") || mounted(other, "toolgate-mcp-pay")) {
			t.Fatalf("container %s mounts an upstream credential", other.Name)
		}
	}
}

// TestRefusesMalformedMCPUpstreams: a malformed annotation, or a Pod
// whose own containers could read an upstream's credential, is refused
// with the reason.
func TestRefusesMalformedMCPUpstreams(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"github", "want NAME=URL"},
		{"GitHub=https://x/mcp", `NAME "GitHub" must be a DNS label`},
		{"a=https://x/mcp,a=https://y/mcp", `NAME "a" is given twice`},
		{"a=ftp://x/mcp", "the URL must be http(s)://host/path"},
		{"a=https://user:hunter2@x/mcp", "without credentials"},
		{"a=https://x/mcp;token=t", `the only option is secret=SECRET[/KEY]`},
		{"a=https://x/mcp;secret=Bad_Name", `secret "Bad_Name" is not a Secret name`},
		{" , ", "names no upstream"},
	} {
		p := mcpPod("mcp-bad", c.value)
		refused(t, p, c.want)
		if strings.Contains(c.value, "hunter2") {
			err := k8sClient.Create(t.Context(), mcpPod("mcp-bad", c.value))
			if err == nil || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the refusal repeats the URL's password: %v", err)
			}
		}
	}
	withEnv := mcpPod("mcp-env", "github=https://x/mcp;secret=github-mcp-token")
	withEnv.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "GITHUB_TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "github-mcp-token"}, Key: "header"}}}}
	refused(t, withEnv, `spec.containers[0].env[0]: Forbidden: reads Secret "github-mcp-token", an MCP upstream credential`)
	withMount := mcpPod("mcp-mount", "github=https://x/mcp;secret=github-mcp-token")
	withMount.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "github-mcp-token"}}}}
	withMount.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/creds"}}
	refused(t, withMount, `spec.containers[0].volumeMounts[0]: Forbidden: mounts Secret "github-mcp-token"`)
	reserved := mcpPod("mcp-reserved", "github=https://x/mcp")
	reserved.Spec.Volumes = []corev1.Volume{{Name: "toolgate-mcp-github", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	refused(t, reserved, `volume names starting "toolgate-mcp-" are reserved`)
}
