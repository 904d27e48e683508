package chart

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/toolgate/toolgate/internal/testenv"
)

const (
	releaseName      = "toolgate"
	releaseNamespace = "toolgate-system"
)

// nonDefault is every switch away from its default at once.
var nonDefault = []string{
	"--set", "certManager.enabled=true",
	"--set", "crds.keep=false",
	"--set", "metrics.serviceMonitor.enabled=true",
	"--set", "metrics.podMonitor.enabled=true",
	"--set", "metrics.prometheusRule.enabled=true",
	"--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.grafanaDashboard.namespace=monitoring",
	"--set", "sidecarInjection.metricsPort=9300",
	"--set", "replicaCount=3",
	"--set", "image.repository=registry.example.com/platform/toolgate",
	"--set", "image.tag=v9.8.7",
	"--set", "sidecarInjection.image.repository=registry.example.com/platform/toolgate-sidecar",
	"--set", "sidecarInjection.image.digest=sha256:" + strings.Repeat("ab", 32),
	"--set", "manager.namespaces={team-a,team-b}",
	"--set", "manager.publishRego=true",
	"--set", "manager.regoUnsigned=true",
	"--set", "sidecarInjection.nativeSidecar=false",
	"--set", "clusterName=prod-eu-1",
	"--set", "usage.redis.url=redis://toolgate@redis.toolgate-system.svc:6379/2",
	"--set", "usage.redis.passwordSecret=toolgate-redis",
	"--set", "sidecarInjection.socket=/run/agent-gate/gate.sock",
	"--set", "sidecarInjection.runAsUser=4242",
	"--set", "sidecarInjection.runAsGroup=4343",
	"--set", "networkPolicy.enabled=true",
	"--set", "networkPolicy.monitoringPodSelector.matchLabels.app=prometheus",
	"--set", "sidecarInjection.resources.requests.cpu=25m",
	"--set", "sidecarInjection.resources.limits.cpu=2",
	"--set", "sidecarInjection.resources.requests.memory=96Mi",
	"--set", "sidecarInjection.resources.limits.memory=96Mi",
	"--set", "manager.hostNetwork=true",
	"--set", "webhook.port=10250",
	"--set", "manager.metricsPort=18080",
	"--set", "manager.healthProbePort=18081",
	"--set", "webhook.timeoutSeconds=25",
	"--set", "webhook.failurePolicy=Ignore",
	"--set", "manager.podSecurityContext.seccompProfile.type=RuntimeDefault",
	"--set", "manager.podSecurityContext.runAsUser=null",
	"--set", "manager.podSecurityContext.runAsGroup=null",
	"--set", "manager.securityContext.runAsNonRoot=true",
	"--set", "approvals.retention=90m",
	"--set", "approvals.notify.url=https://hooks.example.com/toolgate?team=payments&env=prod",
	"--set", "approvals.notify.authSecret.name=approvals-notify",
	"--set", "approvals.notify.authSecret.key=token",
	"--set", "reports.enabled=true",
	"--set", "reports.format=wgpolicyk8s",
	"--set", "reports.window=30m",
	"--set", "reports.port=18090",
}

// kubeVersion is the API server version charts render for: the envtest
// control plane's. Without it, helm template assumes v1.20, which the
// chart's kubeVersion refuses.
const kubeVersion = "1.37.2"

// helmTemplate renders the chart as release toolgate in toolgate-system.
func helmTemplate(args ...string) (string, error) {
	return helmTemplateAs(releaseName, releaseNamespace, args...)
}

func helmTemplateAs(release, namespace string, args ...string) (string, error) {
	return helm.Run(append([]string{"template", release, testenv.ChartDir(), "--namespace", namespace, "--kube-version", kubeVersion}, args...)...)
}

// render renders the chart and decodes every object, failing the test on
// any error.
func render(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	return renderAs(t, releaseName, releaseNamespace, args...)
}

func renderAs(t *testing.T, release, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helmTemplateAs(release, namespace, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatalf("decoding helm template output: %v\n%s", err, out)
	}
	return objs
}

// decodeObjects splits a multi-document YAML stream into objects, dropping
// empty documents (a disabled template renders to nothing or a comment).
func decodeObjects(stream string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document without kind or name: %v", m)
		}
		objs = append(objs, u)
	}
}

// find returns the only object of kind named name; name "" matches any.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	found := all(objs, kind)
	var match []*unstructured.Unstructured
	for _, o := range found {
		if name == "" || o.GetName() == name {
			match = append(match, o)
		}
	}
	if len(match) != 1 {
		t.Fatalf("want exactly one %s %q, found %d (of %s)", kind, name, len(match), kindNames(objs))
	}
	return match[0]
}

func all(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func kindNames(objs []*unstructured.Unstructured) string {
	var s []string
	for _, o := range objs {
		s = append(s, o.GetKind()+"/"+o.GetName())
	}
	return strings.Join(s, ", ")
}

// field reads a nested field, failing when it is absent.
func field(t *testing.T, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s/%s: no field %s (%v)", o.GetKind(), o.GetName(), strings.Join(path, "."), err)
	}
	return v
}

// typed converts an object into its Go type, failing on unknown fields.
func typed[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s/%s: %v", o.GetKind(), o.GetName(), err)
	}
	return out
}

// flagValue returns the value of --name=value in args, and whether it is
// there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// containerPort returns the number of the container port called name.
func containerPort(t *testing.T, c *corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %q", c.Name, name)
	return 0
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

func itoaPort(p int32) string { return strconv.Itoa(int(p)) }
