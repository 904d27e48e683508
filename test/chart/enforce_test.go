package chart

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// enforceObject finds the one kind object whose name ends in
// enforce-sidecar (other admission policies may sit beside it).
func enforceObject(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range all(objs, kind) {
		if strings.HasSuffix(o.GetName(), "enforce-sidecar") {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s objects named *enforce-sidecar, want 1", len(found), kind)
	}
	return found[0]
}

// TestEnforcePolicyMatchesKustomize: the chart's enforce-sidecar admission
// policy is config/enforce's, and each binding names its own policy.
func TestEnforcePolicyMatchesKustomize(t *testing.T) {
	t.Parallel()
	k, h := kustomize(t, "config/default"), render(t)
	kp, hp := enforceObject(t, k, "ValidatingAdmissionPolicy"), enforceObject(t, h, "ValidatingAdmissionPolicy")
	if !reflect.DeepEqual(kp.Object["spec"], hp.Object["spec"]) {
		t.Errorf("enforce policy spec:\nkustomize %v\nchart     %v", kp.Object["spec"], hp.Object["spec"])
	}
	for name, objs := range map[string][]*unstructured.Unstructured{"kustomize": k, "chart": h} {
		policy := enforceObject(t, objs, "ValidatingAdmissionPolicy").GetName()
		binding := enforceObject(t, objs, "ValidatingAdmissionPolicyBinding")
		if got, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); got != policy {
			t.Errorf("%s: binding names policy %q, the policy is %q", name, got, policy)
		}
	}
	for _, o := range render(t, "--set", "sidecarInjection.enabled=false") {
		if strings.HasSuffix(o.GetName(), "enforce-sidecar") {
			t.Errorf("%s %s is rendered without sidecar injection", o.GetKind(), o.GetName())
		}
	}
}

// TestEnforcePolicyPinsTheSidecarImage: the policy accepts only the image the
// manager injects, in the chart whatever the values, and in kustomize.
func TestEnforcePolicyPinsTheSidecarImage(t *testing.T) {
	t.Parallel()
	for name, objs := range map[string][]*unstructured.Unstructured{
		"kustomize": kustomize(t, "config/default"),
		"chart":     render(t),
		"chart with another sidecar image": render(t, "--set", "sidecarInjection.image.repository=registry.example/tg",
			"--set", "sidecarInjection.image.tag=9.9.9"),
	} {
		image := installationOf(t, objs).flag(t, "sidecar-image")
		vap := enforceObject(t, objs, "ValidatingAdmissionPolicy")
		validations, _, _ := unstructured.NestedSlice(vap.Object, "spec", "validations")
		pinned := false
		for _, v := range validations {
			expr, _ := v.(map[string]any)["expression"].(string)
			pinned = pinned || strings.Contains(expr, "c.image == '"+image+"'")
		}
		if !pinned {
			t.Errorf("%s: no enforce validation pins the injected image %s", name, image)
		}
	}
}
