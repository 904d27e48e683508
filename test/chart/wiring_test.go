package chart

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/webhook"
)

// installation is a rendered chart with the objects the manager's flags must
// name.
type installation struct {
	objs       []*unstructured.Unstructured
	deployment *appsv1.Deployment
	args       []string
	validating *admissionv1.ValidatingWebhookConfiguration
	mutating   *admissionv1.MutatingWebhookConfiguration
}

func install(t *testing.T, args ...string) installation {
	t.Helper()
	return installationOf(t, render(t, args...))
}

func installationOf(t *testing.T, objs []*unstructured.Unstructured) installation {
	t.Helper()
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ""))
	return installation{
		objs:       objs,
		deployment: d,
		args:       d.Spec.Template.Spec.Containers[0].Args,
		validating: typed[admissionv1.ValidatingWebhookConfiguration](t, find(t, objs, "ValidatingWebhookConfiguration", "")),
		mutating:   typed[admissionv1.MutatingWebhookConfiguration](t, find(t, objs, "MutatingWebhookConfiguration", "")),
	}
}

func (in installation) flag(t *testing.T, name string) string {
	t.Helper()
	v, ok := flagValue(in.args, name)
	if !ok {
		t.Fatalf("the manager gets no --%s (args %q)", name, in.args)
	}
	return v
}

// TestFlagsNameTheRenderedObjects: the manager finds its Service, Secret and
// webhook configurations by the names in its flags, so each must exist.
func TestFlagsNameTheRenderedObjects(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{"default": nil, "non-default": nonDefault,
		"renamed": {"--set", "fullnameOverride=gate"}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := install(t, args...)
			svc := typed[corev1.Service](t, find(t, in.objs, "Service", in.flag(t, "webhook-service-name")))
			if got := in.validating.Name; got != in.flag(t, "validating-webhook-configuration") {
				t.Errorf("ValidatingWebhookConfiguration %q, flag names %q", got, in.flag(t, "validating-webhook-configuration"))
			}
			if got := in.mutating.Name; got != in.flag(t, "mutating-webhook-configuration") {
				t.Errorf("MutatingWebhookConfiguration %q, flag names %q", got, in.flag(t, "mutating-webhook-configuration"))
			}
			refs := []*admissionv1.ServiceReference{in.validating.Webhooks[0].ClientConfig.Service, in.mutating.Webhooks[0].ClientConfig.Service}
			for _, ref := range refs {
				if ref == nil || ref.Name != svc.Name || ref.Namespace != releaseNamespace || ref.Port == nil || *ref.Port != svc.Spec.Ports[0].Port {
					t.Errorf("webhook calls %+v, want service %s/%s port %d", ref, releaseNamespace, svc.Name, svc.Spec.Ports[0].Port)
				}
			}
			c := &in.deployment.Spec.Template.Spec.Containers[0]
			if svc.Spec.Ports[0].TargetPort.StrVal != "webhook" || containerPort(t, c, "webhook") != int32(atoi(t, in.flag(t, "webhook-port"))) {
				t.Errorf("webhook Service targets %v; the container's webhook port must be --webhook-port", svc.Spec.Ports[0].TargetPort.String())
			}
			if !selects(t, svc.Spec.Selector, in.deployment) {
				t.Errorf("webhook Service selector %v does not select the manager pods", svc.Spec.Selector)
			}
			if in.flag(t, "webhook-secret-namespace") != releaseNamespace {
				t.Errorf("--webhook-secret-namespace=%q", in.flag(t, "webhook-secret-namespace"))
			}
			secret := in.flag(t, "webhook-secret-name")
			// The certificates' volume; approvals.notify.authSecret adds
			// another (approval_values_test.go).
			vol := in.deployment.Spec.Template.Spec.Volumes
			i := slices.IndexFunc(vol, func(v corev1.Volume) bool { return v.Name == "webhook-certs" })
			if i < 0 || vol[i].Secret == nil || vol[i].Secret.SecretName != secret {
				t.Fatalf("want the %s Secret mounted, got volumes %+v", secret, vol)
			}
			mounts := c.VolumeMounts
			j := slices.IndexFunc(mounts, func(m corev1.VolumeMount) bool { return m.Name == "webhook-certs" })
			if j < 0 || mounts[j].MountPath != in.flag(t, "webhook-cert-dir") || !mounts[j].ReadOnly {
				t.Errorf("want the Secret mounted read-only at --webhook-cert-dir, got %+v", mounts)
			}
			if in.deployment.Spec.Template.Spec.ServiceAccountName != find(t, in.objs, "ServiceAccount", "").GetName() {
				t.Error("the Deployment does not run as the chart's ServiceAccount")
			}
		})
	}
}

func TestSelfManagedCertificatesByDefault(t *testing.T) {
	t.Parallel()
	in := install(t)
	if in.flag(t, "webhook-cert-mode") != "self" {
		t.Errorf("--webhook-cert-mode=%q, want self", in.flag(t, "webhook-cert-mode"))
	}
	s := typed[corev1.Secret](t, find(t, in.objs, "Secret", in.flag(t, "webhook-secret-name")))
	if s.Type != corev1.SecretTypeOpaque || len(s.Data) != 0 {
		t.Errorf("want an empty Opaque Secret for the rotator to fill, got type %q with %d keys", s.Type, len(s.Data))
	}
	if v := in.deployment.Spec.Template.Spec.Volumes[0].Secret.Optional; v == nil || !*v {
		t.Error("the certificate volume must be optional: the Secret is empty until the rotator fills it")
	}
	for _, kind := range []string{"Certificate", "Issuer"} {
		if n := len(all(in.objs, kind)); n != 0 {
			t.Errorf("self mode renders %d %s objects", n, kind)
		}
	}
	for _, o := range []metav1.Object{in.validating, in.mutating} {
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("%s: cert-manager annotation in self mode", o.GetName())
		}
	}
}

func TestCertManagerMode(t *testing.T) {
	t.Parallel()
	in := install(t, nonDefault...)
	if in.flag(t, "webhook-cert-mode") != "provided" {
		t.Errorf("--webhook-cert-mode=%q, want provided", in.flag(t, "webhook-cert-mode"))
	}
	if n := len(all(in.objs, "Secret")); n != 0 {
		t.Errorf("cert-manager mode renders %d Secrets; cert-manager owns the certificate Secret", n)
	}
	cert := find(t, in.objs, "Certificate", "")
	if got := field(t, cert, "spec", "secretName"); got != in.flag(t, "webhook-secret-name") {
		t.Errorf("Certificate writes Secret %v, the manager mounts %s", got, in.flag(t, "webhook-secret-name"))
	}
	dnsName := in.flag(t, "webhook-service-name") + "." + releaseNamespace + ".svc"
	if names, _ := field(t, cert, "spec", "dnsNames").([]any); !slices.Contains(names, any(dnsName)) {
		t.Errorf("Certificate dnsNames %v lack %s, the name the API server dials", names, dnsName)
	}
	issuer := find(t, in.objs, "Issuer", "")
	if got := field(t, cert, "spec", "issuerRef", "name"); got != issuer.GetName() {
		t.Errorf("Certificate issuerRef %v, rendered Issuer %s", got, issuer.GetName())
	}
	want := releaseNamespace + "/" + cert.GetName()
	for _, o := range []metav1.Object{in.validating, in.mutating} {
		if got := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != want {
			t.Errorf("%s: inject-ca-from %q, want %q", o.GetName(), got, want)
		}
	}
	if v := in.deployment.Spec.Template.Spec.Volumes[0].Secret.Optional; v != nil && *v {
		t.Error("with cert-manager the certificate volume must not be optional: the manager cannot serve without it")
	}

	// An existing issuer replaces the chart's.
	objs := render(t, "--set", "certManager.enabled=true", "--set", "certManager.issuerRef.name=corp-ca",
		"--set", "certManager.issuerRef.kind=ClusterIssuer")
	if n := len(all(objs, "Issuer")); n != 0 {
		t.Errorf("issuerRef given, yet %d Issuers rendered", n)
	}
	cert = find(t, objs, "Certificate", "")
	if field(t, cert, "spec", "issuerRef", "name") != "corp-ca" || field(t, cert, "spec", "issuerRef", "kind") != "ClusterIssuer" {
		t.Errorf("Certificate issuerRef %v", field(t, cert, "spec", "issuerRef"))
	}
}

func TestMetricsServiceAndServiceMonitor(t *testing.T) {
	t.Parallel()
	in := install(t, nonDefault...)
	svc := typed[corev1.Service](t, find(t, in.objs, "Service", "toolgate-metrics"))
	c := &in.deployment.Spec.Template.Spec.Containers[0]
	if in.flag(t, "metrics-bind-address") != ":"+itoaPort(containerPort(t, c, svc.Spec.Ports[0].TargetPort.StrVal)) {
		t.Errorf("the metrics Service targets port %q, not what --metrics-bind-address serves", svc.Spec.Ports[0].TargetPort.StrVal)
	}
	if !selects(t, svc.Spec.Selector, in.deployment) {
		t.Errorf("metrics Service selector %v does not select the manager pods", svc.Spec.Selector)
	}
	sm := find(t, in.objs, "ServiceMonitor", "")
	matchLabels, _ := field(t, sm, "spec", "selector", "matchLabels").(map[string]any)
	set := labels.Set{}
	for k, v := range matchLabels {
		set[k], _ = v.(string)
	}
	if !set.AsSelector().Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selects %v; metrics Service labels are %v", set, svc.Labels)
	}
	for _, other := range all(in.objs, "Service") {
		if other.GetName() != svc.Name && set.AsSelector().Matches(labels.Set(other.GetLabels())) {
			t.Errorf("ServiceMonitor also selects Service %s", other.GetName())
		}
	}
	endpoints, _ := field(t, sm, "spec", "endpoints").([]any)
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor endpoints %v, want port %s", endpoints, svc.Spec.Ports[0].Name)
	}
	if n := len(all(render(t), "ServiceMonitor")); n != 0 {
		t.Errorf("ServiceMonitor rendered by default (%d); its CRD may not exist", n)
	}
	_, err := helmTemplate("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.service.enabled=false")
	if err == nil || !strings.Contains(err.Error(), "needs metrics.service.enabled") {
		t.Errorf("a ServiceMonitor without its Service: want a refusal, got %v", err)
	}
}

func selects(t *testing.T, selector map[string]string, d *appsv1.Deployment) bool {
	t.Helper()
	return len(selector) > 0 && labels.SelectorFromSet(selector).Matches(labels.Set(d.Spec.Template.Labels))
}

// The PodMonitor finds injected sidecars by the label and port name the
// injector writes, on the port the manager is told to inject.
func TestPodMonitorScrapesInjectedSidecars(t *testing.T) {
	t.Parallel()
	in := install(t, nonDefault...)
	if got := in.flag(t, "sidecar-metrics-port"); got != "9300" {
		t.Errorf("--sidecar-metrics-port=%q, want 9300", got)
	}
	pm := find(t, in.objs, "PodMonitor", "")
	if v := field(t, pm, "spec", "selector", "matchLabels", v1alpha1.LabelInjected); v != "true" {
		t.Errorf("PodMonitor selects %v, want %s=true", field(t, pm, "spec", "selector"), v1alpha1.LabelInjected)
	}
	if field(t, pm, "spec", "namespaceSelector", "any") != true {
		t.Errorf("PodMonitor namespaces %v, want any", field(t, pm, "spec", "namespaceSelector"))
	}
	endpoints, _ := field(t, pm, "spec", "podMetricsEndpoints").([]any)
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != webhook.MetricsPortName {
		t.Errorf("PodMonitor endpoints %v, want port %s", endpoints, webhook.MetricsPortName)
	}
	if n := len(all(render(t), "PodMonitor")); n != 0 {
		t.Errorf("PodMonitor rendered by default (%d); its CRD may not exist", n)
	}
	for _, off := range []string{"sidecarInjection.enabled=false", "sidecarInjection.metricsPort=0"} {
		_, err := helmTemplate("--set", "metrics.podMonitor.enabled=true", "--set", off)
		if err == nil || !strings.Contains(err.Error(), "metrics.podMonitor.enabled needs") {
			t.Errorf("a PodMonitor with %s: want a refusal, got %v", off, err)
		}
	}
}
