package webhook

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// settledPodWebhookCalls is podWebhookCalls once it stops moving: the
// counter is incremented after the webhook's answer is written, so an
// admission that has returned may not be counted yet.
func settledPodWebhookCalls(t *testing.T) float64 {
	t.Helper()
	prev := podWebhookCalls(t)
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		now := podWebhookCalls(t)
		if now == prev {
			return now
		}
		prev = now
	}
	t.Fatalf("the pod webhook's request count did not settle (last %v)", prev)
	return prev
}

// podWebhookCalls is how many admission requests the pod webhook served,
// from controller-runtime's own counter.
func podWebhookCalls(t *testing.T) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "webhook") == "/mutate-v1-pod" {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// The API server evaluates the matchConditions: a Pod without the
// annotation is admitted without toolgate ever being asked, and an
// annotated one is sent to it.
func TestUnannotatedPodsNeverReachTheWebhook(t *testing.T) {
	before := settledPodWebhookCalls(t)
	for i, annotations := range []map[string]string{nil, {v1alpha1.AnnotationInject: "false"}, {"other": "true"}} {
		p := pod("not-asked-"+string(rune('a'+i)), annotations)
		if err := k8sClient.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	if after := settledPodWebhookCalls(t); after != before {
		t.Errorf("the pod webhook served %v requests for Pods without the annotation", after-before)
	}
	if err := k8sClient.Create(context.Background(), pod("asked", map[string]string{v1alpha1.AnnotationInject: "true"})); err != nil {
		t.Fatal(err)
	}
	if after := settledPodWebhookCalls(t); after != before+1 {
		t.Errorf("the pod webhook served %v requests for one annotated Pod, want 1", after-before)
	}
}

// Of the updates, the API server sends the webhook only those of Pods
// carrying the sidecar (their own, and their ephemeral containers'): not
// kubectl label or kubectl debug of any other Pod.
func TestOnlyUpdatesOfInjectedPodsReachTheWebhook(t *testing.T) {
	ctx := context.Background()
	plain := admit(t, pod("updated-plain", nil))
	injected := injectedPod(t, "updated-injected")
	label := client.RawPatch(types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`))
	before := settledPodWebhookCalls(t)
	if err := debug(t, k8sClient, plain, debugContainer("dbg")); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Patch(ctx, &plain, label); err != nil {
		t.Fatal(err)
	}
	if after := settledPodWebhookCalls(t); after != before {
		t.Errorf("the pod webhook served %v requests for updates of a Pod without the sidecar", after-before)
	}
	if err := debug(t, k8sClient, injected, debugContainer("dbg")); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Patch(ctx, &injected, label); err != nil {
		t.Fatal(err)
	}
	// At least two: the API server retries a patch that meets a conflict,
	// admission included, so one update can reach the webhook twice.
	if after := settledPodWebhookCalls(t); after < before+2 {
		t.Errorf("the pod webhook served %v requests for two updates of an injected Pod, want 2 (or more, with retries)", after-before)
	}
}
