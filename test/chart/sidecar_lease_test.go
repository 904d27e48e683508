package chart

import (
	"reflect"
	"testing"
)

// TestSidecarLeasePolicyShipsAlike: config/default carries the chart's
// sidecar Lease admission policy and binding (test/sidecarlease attacks
// the config/ copy on a real API server), named after the release.
func TestSidecarLeasePolicyShipsAlike(t *testing.T) {
	t.Parallel()
	chart, kust := render(t), kustomize(t, "config/default")
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		h, k := find(t, chart, kind, "toolgate-sidecar-lease"), find(t, kust, kind, "toolgate-sidecar-lease")
		if !reflect.DeepEqual(h.Object["spec"], k.Object["spec"]) {
			t.Errorf("%s spec differs:\nchart     %v\nkustomize %v", kind, h.Object["spec"], k.Object["spec"])
		}
	}
	other := renderAs(t, "other", "other-system")
	if b := find(t, other, "ValidatingAdmissionPolicyBinding", "other-toolgate-sidecar-lease"); field(t, b, "spec", "policyName") != "other-toolgate-sidecar-lease" {
		t.Errorf("release other: the binding names policy %v", field(t, b, "spec", "policyName"))
	}
}
