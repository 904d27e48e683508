package chart

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestKustomizeMatchesTheChart: config/default runs the manager with the
// chart's security settings, probes and resources, and its flags name
// objects it contains.
func TestKustomizeMatchesTheChart(t *testing.T) {
	t.Parallel()
	k := installationOf(t, kustomize(t, "config/default"))
	h := install(t)
	kPod, hPod := k.deployment.Spec.Template.Spec, h.deployment.Spec.Template.Spec
	if !reflect.DeepEqual(kPod.SecurityContext, hPod.SecurityContext) {
		t.Errorf("pod securityContext:\nkustomize %+v\nchart     %+v", kPod.SecurityContext, hPod.SecurityContext)
	}
	kc, hc := kPod.Containers[0], hPod.Containers[0]
	for name, pair := range map[string][2]any{
		"securityContext": {kc.SecurityContext, hc.SecurityContext},
		"livenessProbe":   {kc.LivenessProbe, hc.LivenessProbe},
		"readinessProbe":  {kc.ReadinessProbe, hc.ReadinessProbe},
		"resources":       {kc.Resources, hc.Resources},
		"ports":           {portsByName(kc.Ports), portsByName(hc.Ports)},
		"volumeMounts":    {kc.VolumeMounts, hc.VolumeMounts},
		"replicas":        {*k.deployment.Spec.Replicas, *h.deployment.Spec.Replicas},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s:\nkustomize %+v\nchart     %+v", name, pair[0], pair[1])
		}
	}
	for flag, kind := range map[string]string{
		"webhook-service-name":             "Service",
		"webhook-secret-name":              "Secret",
		"validating-webhook-configuration": "ValidatingWebhookConfiguration",
		"mutating-webhook-configuration":   "MutatingWebhookConfiguration",
	} {
		find(t, k.objs, kind, k.flag(t, flag))
	}
	if ref := k.validating.Webhooks[0].ClientConfig.Service; ref.Name != k.flag(t, "webhook-service-name") || ref.Namespace != k.deployment.Namespace {
		t.Errorf("validating webhook calls %s/%s", ref.Namespace, ref.Name)
	}
	if v := kPod.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.SecretName != k.flag(t, "webhook-secret-name") {
		t.Errorf("kustomize mounts %+v, not the webhook Secret", v)
	}
	find(t, k.objs, "PodDisruptionBudget", "")
	svc := find(t, k.objs, "Service", "toolgate-metrics")
	if typed[corev1.Service](t, svc).Spec.Ports[0].TargetPort.StrVal != "metrics" {
		t.Error("the metrics Service does not target the metrics port")
	}
	sel := namespaceSelector(t, k.mutating.Webhooks[0].NamespaceSelector)
	for _, ns := range []string{"kube-system", k.deployment.Namespace} {
		if sel.Matches(namespaceLabels(ns)) {
			t.Errorf("kustomize's pod webhook sees namespace %s", ns)
		}
	}
	if !sel.Matches(namespaceLabels("default")) {
		t.Error("kustomize's pod webhook skips namespace default")
	}
}

func portsByName(ports []corev1.ContainerPort) map[string]corev1.ContainerPort {
	m := map[string]corev1.ContainerPort{}
	for _, p := range ports {
		m[p.Name] = p
	}
	return m
}
