package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

// generatedWebhooks reads config/webhook/manifests.yaml, which controller-gen
// writes from the webhook markers: the source of truth for rules and paths.
func generatedWebhooks(t *testing.T) (*admissionv1.ValidatingWebhookConfiguration, *admissionv1.MutatingWebhookConfiguration) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.WebhookDir(), "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return typed[admissionv1.ValidatingWebhookConfiguration](t, find(t, objs, "ValidatingWebhookConfiguration", "")),
		typed[admissionv1.MutatingWebhookConfiguration](t, find(t, objs, "MutatingWebhookConfiguration", ""))
}

// comparable drops what legitimately differs between the generated and the
// installed configuration: where the service is, and which namespaces and
// Pods the pod webhook sees (TestPodWebhookMatchConditions checks those).
func comparableValidating(w admissionv1.ValidatingWebhook) admissionv1.ValidatingWebhook {
	path := w.ClientConfig.Service.Path
	w.ClientConfig = admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Path: path}}
	return w
}

func comparableMutating(w admissionv1.MutatingWebhook) admissionv1.MutatingWebhook {
	path := w.ClientConfig.Service.Path
	w.ClientConfig = admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Path: path}}
	w.NamespaceSelector = nil
	w.MatchConditions = nil
	return w
}

// TestPodWebhookMatchConditions: the chart and config/default both carry
// the CEL condition the webhook suite proves the API server evaluates.
func TestPodWebhookMatchConditions(t *testing.T) {
	t.Parallel()
	want := webhook.InjectMatchConditions()
	chart := install(t).mutating.Webhooks[0].MatchConditions
	if !reflect.DeepEqual(chart, want) {
		t.Errorf("chart matchConditions %+v\nwant %+v", chart, want)
	}
	kust := typed[admissionv1.MutatingWebhookConfiguration](t, find(t, kustomize(t, "config/default"), "MutatingWebhookConfiguration", ""))
	if got := kust.Webhooks[0].MatchConditions; !reflect.DeepEqual(got, want) {
		t.Errorf("config/default matchConditions %+v\nwant %+v", got, want)
	}
}

// TestChartWebhooksMatchGenerated compares every webhook field but the
// service location and the pod webhook's namespaceSelector with what
// controller-gen generated from the markers.
func TestChartWebhooksMatchGenerated(t *testing.T) {
	t.Parallel()
	genV, genM := generatedWebhooks(t)
	for name, args := range map[string][]string{"default": nil, "non-default": nonDefault} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := install(t, args...)
			if len(in.validating.Webhooks) != len(genV.Webhooks) || len(in.mutating.Webhooks) != len(genM.Webhooks) {
				t.Fatalf("chart has %d validating and %d mutating webhooks, generated %d and %d",
					len(in.validating.Webhooks), len(in.mutating.Webhooks), len(genV.Webhooks), len(genM.Webhooks))
			}
			for i := range genV.Webhooks {
				got, want := comparableValidating(in.validating.Webhooks[i]), comparableValidating(genV.Webhooks[i])
				if args != nil {
					// webhook.failurePolicy and webhook.timeoutSeconds move
					// these away from the markers' defaults on purpose
					// (TestPolicyWebhookSettings).
					got.FailurePolicy, got.TimeoutSeconds, want.FailurePolicy, want.TimeoutSeconds = nil, nil, nil, nil
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("validating webhook %d:\nchart     %+v\ngenerated %+v", i, got, want)
				}
			}
			for i := range genM.Webhooks {
				if got, want := comparableMutating(in.mutating.Webhooks[i]), comparableMutating(genM.Webhooks[i]); !reflect.DeepEqual(got, want) {
					t.Errorf("mutating webhook %d:\nchart     %+v\ngenerated %+v", i, got, want)
				}
			}
		})
	}
}

// TestPodWebhookCannotBlockTheCluster: the pod webhook fails open, fast,
// once, and never sees kube-system or toolgate's own namespace.
func TestPodWebhookCannotBlockTheCluster(t *testing.T) {
	t.Parallel()
	w := install(t, "--set", "sidecarInjection.excludeNamespaces={istio-system}").mutating.Webhooks[0]
	if w.FailurePolicy == nil || *w.FailurePolicy != admissionv1.Ignore {
		t.Errorf("failurePolicy %v, want Ignore", w.FailurePolicy)
	}
	if w.TimeoutSeconds == nil || *w.TimeoutSeconds > 5 {
		t.Errorf("timeoutSeconds %v, want at most 5", w.TimeoutSeconds)
	}
	if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionv1.NeverReinvocationPolicy {
		t.Errorf("reinvocationPolicy %v, want Never", w.ReinvocationPolicy)
	}
	sel := namespaceSelector(t, w.NamespaceSelector)
	for ns, want := range map[string]bool{"kube-system": false, releaseNamespace: false, "istio-system": false, "default": true, "agents": true} {
		if got := sel.Matches(namespaceLabels(ns)); got != want {
			t.Errorf("namespace %s: webhook called %v, want %v", ns, got, want)
		}
	}
}

func TestPodWebhookFollowsWatchedNamespaces(t *testing.T) {
	t.Parallel()
	sel := namespaceSelector(t, install(t, nonDefault...).mutating.Webhooks[0].NamespaceSelector)
	for ns, want := range map[string]bool{"team-a": true, "team-b": true, "team-c": false, "default": false, "kube-system": false} {
		if got := sel.Matches(namespaceLabels(ns)); got != want {
			t.Errorf("namespace %s: webhook called %v, want %v", ns, got, want)
		}
	}
	// A watched namespace is never toolgate's own.
	sel = namespaceSelector(t, install(t, "--set", "manager.namespaces={"+releaseNamespace+",team-a}").mutating.Webhooks[0].NamespaceSelector)
	if sel.Matches(namespaceLabels(releaseNamespace)) {
		t.Error("the release namespace is injected when it is in manager.namespaces")
	}
}

func namespaceSelector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	if s == nil {
		t.Fatal("no namespaceSelector")
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// namespaceLabels are the labels the API server puts on every namespace.
func namespaceLabels(ns string) labels.Set {
	return labels.Set{"kubernetes.io/metadata.name": ns}
}
