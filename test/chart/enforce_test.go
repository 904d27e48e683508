package chart

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/toolgate/toolgate/manager"
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

// TestEnforcePolicyPinsWhatTheManagerInjects: the enforce policy admits a
// sidecar only if it is what this installation's manager injects, so its
// installation variables must be what the manager's flags make it write
// (webhook's TestEnforcePolicyAdmitsWhatEachConfigurationInjects installs
// the policy for several sets of options): image, pull policy, bundle
// ConfigMap, socket, listen address, user, group, native sidecar, metrics
// port and cluster name, in the chart whatever the values, and in
// kustomize, whose manager runs with its defaults but the image.
func TestEnforcePolicyPinsWhatTheManagerInjects(t *testing.T) {
	t.Parallel()
	for name, objs := range map[string][]*unstructured.Unstructured{
		"kustomize":         kustomize(t, "config/default"),
		"chart":             render(t),
		"chart non-default": render(t, nonDefault...),
		"chart TCP only": render(t, "--set", "sidecarInjection.socket=", "--set", "sidecarInjection.metricsPort=0",
			"--set", "sidecarInjection.image.pullPolicy=Always", "--set", "manager.bundleConfigMapName=agents-bundle"),
		"chart socket only": render(t, "--set", "sidecarInjection.listen=", "--set", "sidecarInjection.image.tag=9.9.9"),
	} {
		t.Run(name, func(t *testing.T) {
			args := installationOf(t, objs).args
			o := manager.DefaultOptions()
			fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
			fs.ParseErrorsAllowlist.UnknownFlags = true // zap's
			o.AddFlags(fs)
			if err := fs.Parse(args[1:]); err != nil {
				t.Fatal(err)
			}
			w := o.Webhooks
			want := map[string]string{
				"image": strconv.Quote(w.SidecarImage), "pullPolicy": strconv.Quote(w.SidecarPullPolicy),
				"bundleConfigMap": strconv.Quote(o.Controller.ConfigMapName),
				"socket":          strconv.Quote(w.SidecarSocket), "listen": strconv.Quote(w.SidecarListen),
				"uid": strconv.FormatInt(w.SidecarUID, 10), "gid": strconv.FormatInt(w.SidecarGID, 10),
				"native": strconv.FormatBool(w.SidecarNative), "metricsPort": strconv.Itoa(w.SidecarMetrics),
				"clusterName": strconv.Quote(w.ClusterName),
				"usageStore":  strconv.Quote(w.SidecarUsageStore), "usageStoreSecret": strconv.Quote(w.SidecarUsageStoreSecret),
			}
			vap := enforceObject(t, objs, "ValidatingAdmissionPolicy")
			variables, _, _ := unstructured.NestedSlice(vap.Object, "spec", "variables")
			got := map[string]string{}
			for _, v := range variables {
				m, _ := v.(map[string]any)
				name, _ := m["name"].(string)
				got[name], _ = m["expression"].(string)
			}
			for k, expr := range want {
				if got[k] != expr {
					t.Errorf("variable %s is %q; the manager (%q) injects %s", k, got[k], args, expr)
				}
			}
		})
	}
}
