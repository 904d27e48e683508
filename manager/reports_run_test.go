package manager

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/reports"
)

// TestManagerWritesReportsFromSidecarBatches runs the manager as
// `--reports` runs it: a batch posted to its endpoint with a sidecar's
// token becomes the namespace's Report.
func TestManagerWritesReportsFromSidecarBatches(t *testing.T) {
	if _, err := envtest.InstallCRDs(restCfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(testenv.RepoRoot(), "config", "reports-crds")}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s, "mgr-reports-")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}}
	if err := k8s.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{v1alpha1.ReportsAudience}}}
	if err := k8s.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	// The manager's own Pod, as the downward API names it in a cluster: a
	// former leader's, still labelled as the receiver.
	self := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "toolgate-manager-0",
		Labels: map[string]string{v1alpha1.LabelReportsReceiver: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "toolgate:test"}}}}
	if err := k8s.Create(ctx, self); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv("POD_NAME", self.Name)
	receiver := func() string {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(self), p); err != nil {
			t.Fatal(err)
		}
		return p.Labels[v1alpha1.LabelReportsReceiver]
	}
	o := testOptions(ns)
	o.Reports.Enabled = true
	o.Reports.Listen = testenv.FreeLoopbackAddr(t)
	o.Reports.Interval = 100 * time.Millisecond
	mgr, err := New(restCfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := receiver(); got != "" {
		t.Fatalf("before it leads, the manager's Pod is still labelled the receiver (%q)", got)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(runCtx) }()

	line := fmt.Sprintf(`[{"time":%q,"agent_id":"shop","tool_name":"pay","decision":"deny","effect":"deny","matched_policy_id":"pay-cap","matched_rule_id":"over","labels":{"namespace":%q}}]`,
		time.Now().UTC().Format(time.RFC3339Nano), ns)
	testenv.Eventually(t, "the manager's reports endpoint accepts a batch", func() (bool, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+o.Reports.Listen+v1alpha1.ReportsPath, strings.NewReader(line))
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			select {
			case err := <-stopped:
				t.Fatalf("the manager stopped: %v", err)
			default:
			}
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	testenv.Eventually(t, "the Report counts the decision", func() (bool, string) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(reports.OpenReportsGVK)
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.ReportName}, u); err != nil {
			return false, err.Error()
		}
		fail, _, _ := unstructured.NestedInt64(u.Object, "summary", "fail")
		return fail == 1, fmt.Sprintf("summary fail %d", fail)
	})
	if got := receiver(); got != "true" {
		t.Errorf("the leader receiving decisions is not labelled the receiver (%q)", got)
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := receiver(); got != "" {
		t.Errorf("a stopped manager's Pod is still labelled the receiver (%q)", got)
	}
}
