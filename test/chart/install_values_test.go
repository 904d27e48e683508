package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestChartKubeVersion: the chart refuses API servers older than 1.30
// (matchConditions, CEL) and accepts the pre-release suffixes managed
// clusters report.
func TestChartKubeVersion(t *testing.T) {
	t.Parallel()
	_, err := helm.Run("template", releaseName, testenv.ChartDir(), "--namespace", releaseNamespace, "--kube-version", "1.29.9")
	if err == nil || !strings.Contains(err.Error(), ">=1.30.0-0") {
		t.Errorf("rendering for Kubernetes 1.29: %v, want a kubeVersion refusal", err)
	}
	if _, err := helm.Run("template", releaseName, testenv.ChartDir(), "--namespace", releaseNamespace, "--kube-version", "1.30.4-eks-a737599"); err != nil {
		t.Errorf("rendering for an EKS 1.30 pre-release version: %v", err)
	}
}

// TestChartArtifactHubAnnotations: the annotations Artifact Hub reads parse
// as the YAML lists it expects, and name every CRD the chart installs.
func TestChartArtifactHubAnnotations(t *testing.T) {
	t.Parallel()
	out, err := helm.Run("show", "chart", testenv.ChartDir())
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		KubeVersion string            `json:"kubeVersion"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal([]byte(out), &chart); err != nil {
		t.Fatalf("helm show chart: %v\n%s", err, out)
	}
	if chart.KubeVersion != ">=1.30.0-0" {
		t.Errorf("kubeVersion %q", chart.KubeVersion)
	}
	var crds []struct{ Kind, Version, Name string }
	if err := yaml.Unmarshal([]byte(chart.Annotations["artifacthub.io/crds"]), &crds); err != nil {
		t.Fatalf("artifacthub.io/crds: %v", err)
	}
	var crdNames []string
	for _, o := range render(t) {
		if o.GetKind() == "CustomResourceDefinition" {
			crdNames = append(crdNames, o.GetName())
		}
	}
	for _, name := range crdNames {
		found := false
		for _, c := range crds {
			found = found || c.Name == name
		}
		if !found {
			t.Errorf("artifacthub.io/crds does not list %s", name)
		}
	}
	if len(crds) != len(crdNames) || len(crds) == 0 {
		t.Errorf("artifacthub.io/crds lists %d CRDs, the chart installs %d", len(crds), len(crdNames))
	}
	for _, key := range []string{"artifacthub.io/images", "artifacthub.io/links"} {
		var list []map[string]string
		if err := yaml.Unmarshal([]byte(chart.Annotations[key]), &list); err != nil || len(list) == 0 {
			t.Errorf("%s: %v (%d entries)", key, err, len(list))
		}
	}
}

// TestSidecarResourcesBlock: sidecarInjection.resources is a standard
// block that reaches the injector's flags; the flat keys of chart 0.1.0 and
// a memory request unlike the limit are refused with the key to use.
func TestSidecarResourcesBlock(t *testing.T) {
	t.Parallel()
	args := managerArgs(t, render(t, nonDefault...))
	for flag, want := range map[string]string{"sidecar-cpu-request": "25m", "sidecar-cpu-limit": "2", "sidecar-memory": "96Mi"} {
		if got, _ := flagValue(args, flag); got != want {
			t.Errorf("--%s=%q, want %q", flag, got, want)
		}
	}
	for set, want := range map[string]string{
		"sidecarInjection.cpuRequest=5m":               "sidecarInjection.cpuRequest was replaced by sidecarInjection.resources.requests.cpu",
		"sidecarInjection.cpuLimit=1":                  "sidecarInjection.cpuLimit was replaced by sidecarInjection.resources.limits.cpu",
		"sidecarInjection.memory=128Mi":                "sidecarInjection.memory was replaced by sidecarInjection.resources.requests.memory and resources.limits.memory",
		"sidecarInjection.resources.limits.memory=1Gi": "requests.memory (64Mi) and limits.memory (1Gi) must be equal",
	} {
		if _, err := helmTemplate("--set", set); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s: %v, want an error saying %q", set, err, want)
		}
	}
}

// TestManagerPodSettings: security contexts come from values (OpenShift
// drops runAsUser so its SCC assigns one), and hostNetwork moves the
// manager's ports onto the node, each from its value.
func TestManagerPodSettings(t *testing.T) {
	t.Parallel()
	def := typed[appsv1.Deployment](t, find(t, render(t), "Deployment", ""))
	if sc := def.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("default pod securityContext %+v, want runAsUser 65532", sc)
	}
	if def.Spec.Template.Spec.HostNetwork {
		t.Error("hostNetwork on by default")
	}
	d := typed[appsv1.Deployment](t, find(t, render(t, nonDefault...), "Deployment", ""))
	spec := d.Spec.Template.Spec
	if sc := spec.SecurityContext; sc == nil || sc.RunAsUser != nil || sc.RunAsGroup != nil || sc.SeccompProfile == nil {
		t.Errorf("pod securityContext %+v, want no runAsUser/runAsGroup and a seccompProfile", sc)
	}
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v dnsPolicy %q, want true and ClusterFirstWithHostNet", spec.HostNetwork, spec.DNSPolicy)
	}
	c := &spec.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("container securityContext %+v lost the defaults it was not told to change", c.SecurityContext)
	}
	args := managerArgs(t, render(t, nonDefault...))
	for flag, port := range map[string]string{"webhook-port": "10250", "metrics-bind-address": ":18080", "health-probe-bind-address": ":18081"} {
		if got, _ := flagValue(args, flag); got != port {
			t.Errorf("--%s=%q, want %q", flag, got, port)
		}
	}
	if p := containerPort(t, c, "webhook"); p != 10250 {
		t.Errorf("webhook container port %d", p)
	}
}

// TestPolicyWebhookSettings: timeoutSeconds and failurePolicy of the
// Policy webhook come from values; the injection webhook keeps its own.
func TestPolicyWebhookSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		timeout int32
		policy  admissionv1.FailurePolicyType
	}{{nil, 10, admissionv1.Fail}, {nonDefault, 25, admissionv1.Ignore}} {
		v := typed[admissionv1.ValidatingWebhookConfiguration](t, find(t, render(t, tc.args...), "ValidatingWebhookConfiguration", ""))
		w := v.Webhooks[0]
		if w.TimeoutSeconds == nil || *w.TimeoutSeconds != tc.timeout || w.FailurePolicy == nil || *w.FailurePolicy != tc.policy {
			t.Errorf("args %v: timeoutSeconds %v failurePolicy %v, want %d %s", tc.args, w.TimeoutSeconds, w.FailurePolicy, tc.timeout, tc.policy)
		}
	}
	for _, bad := range []string{"webhook.timeoutSeconds=31", "webhook.failurePolicy=Allow"} {
		if _, err := helmTemplate("--set", bad); err == nil {
			t.Errorf("--set %s accepted", bad)
		}
	}
}

// TestPolicyWritesBeforeManagerIsReady installs the chart's Policy webhook
// on a real API server with no manager behind its Service (the image
// missing, the Pod not ready) and writes a Policy, as a user would right
// after `helm install`: with the default failurePolicy Fail the API server
// refuses it, naming the webhook (hence NOTES.txt and `helm install
// --wait`); with Ignore it lands. Each webhook is confined to a namespace
// of its own so the package's other tests never meet it.
func TestPolicyWritesBeforeManagerIsReady(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy    string
		wantError bool
	}{{"Fail", true}, {"Ignore", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			ns := "policy-before-ready-" + strings.ToLower(tc.policy)
			createNamespace(t, ns)
			objs := render(t, "--set", "webhook.failurePolicy="+tc.policy, "--set", "sidecarInjection.enabled=false")
			ensureNamespaces(t, objs)
			if err := apply(find(t, objs, "Service", "toolgate-webhook"), false); err != nil {
				t.Fatal(err)
			}
			vwc := find(t, objs, "ValidatingWebhookConfiguration", "").DeepCopy()
			vwc.SetName(vwc.GetName() + "-" + ns)
			// Only the Policy webhook, confined to ns: the configuration's
			// other webhooks (ClusterPolicy, PolicyException) would meet
			// the other subtest's writes.
			hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
			var policyHook map[string]any
			for _, h := range hooks {
				if h.(map[string]any)["name"] == "vpolicy.toolgate.dev" {
					policyHook = h.(map[string]any)
				}
			}
			if policyHook == nil {
				t.Fatalf("no vpolicy.toolgate.dev webhook in %v", hooks)
			}
			policyHook["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}}
			if err := unstructured.SetNestedSlice(vwc.Object, []any{policyHook}, "webhooks"); err != nil {
				t.Fatal(err)
			}
			if err := apply(vwc, false); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := k8s.Delete(ctx, vwc); err != nil && !apierrors.IsNotFound(err) {
					t.Error(err)
				}
			})
			policy := &unstructured.Unstructured{}
			policy.SetGroupVersionKind(k8sschema.GroupVersionKind{Group: "toolgate.dev", Version: "v1alpha1", Kind: "Policy"})
			policy.SetNamespace(ns)
			policy.SetName("no-rm-rf")
			if err := unstructured.SetNestedSlice(policy.Object, []any{map[string]any{
				"id": "no-rm-rf", "effect": "deny",
				"conditions": []any{map[string]any{"field": "tool_name", "operator": "eq", "value": "Bash"}},
			}}, "spec", "rules"); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err := k8s.Create(ctx, policy)
			// The API server calls a webhook once its configuration reaches
			// the admission plugin's informer, shortly after the apply: a
			// create in between is admitted without it. Until the refusal
			// comes (or the deadline), such a Policy is deleted and the
			// create tried again.
			for tc.wantError && err == nil && ctx.Err() == nil {
				if derr := k8s.Delete(ctx, policy); derr != nil && !apierrors.IsNotFound(derr) {
					t.Fatal(derr)
				}
				time.Sleep(100 * time.Millisecond)
				policy.SetResourceVersion("")
				err = k8s.Create(ctx, policy)
			}
			switch {
			case tc.wantError && (err == nil || !strings.Contains(err.Error(), "vpolicy.toolgate.dev")):
				t.Errorf("failurePolicy Fail, no manager: Policy create answered %v, want a refusal naming vpolicy.toolgate.dev", err)
			case !tc.wantError && err != nil:
				t.Errorf("failurePolicy Ignore, no manager: Policy create refused: %v", err)
			}
		})
	}
}

// managerArgs returns the manager container's arguments.
func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ""))
	return d.Spec.Template.Spec.Containers[0].Args
}

// TestInstallNotesWarnBeforeReady: what `helm install` prints, rendered
// against the real API server (server-side dry run, so the chart's
// kubeVersion is checked against its version): with failurePolicy Fail the
// notes warn that Policy writes are refused until the manager is ready and
// say to use --wait; with Ignore they do not.
func TestInstallNotesWarnBeforeReady(t *testing.T) {
	t.Parallel()
	kubeconfig := testenv.WriteKubeconfig(t, testenv.Kubeconfig(t, cfg))
	for policy, warns := range map[string]bool{"Fail": true, "Ignore": false} {
		// Its own release and namespace: helm refuses to install over
		// objects the package's other tests created for real.
		release := "notes-" + strings.ToLower(policy)
		out, err := helm.Run("install", release, testenv.ChartDir(), "--namespace", release, "--create-namespace", "--kubeconfig", kubeconfig,
			"--dry-run=server", "--set", "crds.enabled=false", "--set", "webhook.failurePolicy="+policy)
		if err != nil {
			t.Fatalf("helm install --dry-run=server, failurePolicy %s: %v", policy, err)
		}
		_, notes, ok := strings.Cut(out, "\nNOTES:\n")
		if !ok {
			t.Fatalf("failurePolicy %s: no NOTES in\n%.500s", policy, out)
		}
		if got := strings.Contains(notes, "refuses every Policy") && strings.Contains(notes, "--wait"); got != warns {
			t.Errorf("failurePolicy %s: notes warn %v, want %v:\n%s", policy, got, warns, notes)
		}
	}
}
