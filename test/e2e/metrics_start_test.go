package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestOperatorAlertSeriesExistAtStart: the manager, a real process that
// has published nothing yet, already exports at 0 every counter series
// the chart's alerts take the increase() of (publishes with result
// too_large and failed). Before, those series appeared at 1 with the first
// failure, which increase() over the alert's window does not see.
func TestOperatorAlertSeriesExistAtStart(t *testing.T) {
	dir := t.TempDir()
	bin, cluster := startCluster(t, dir)
	addr := testenv.FreeLoopbackAddr(t)
	args := append(cluster.ManagerArgs(), "--metrics-bind-address", addr)
	if _, err := cluster.StartProcess("manager", bin, args...); err != nil {
		t.Fatal(err)
	}
	scrape := func(what string, ok func(string) bool) string {
		var body string
		testenv.EventuallyWithin(t, 60*time.Second, 100*time.Millisecond, what, func() (bool, string) {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				return false, resp.Status
			}
			body = string(b)
			return ok(body), "not yet"
		})
		return body
	}
	testenv.RequireAlertSeriesAtZero(t, "toolgate_bundle_", scrape("the manager's /metrics", func(string) bool { return true }))

	// Per-namespace series exist once a namespace publishes: then every
	// operator metric the Grafana dashboard queries is there.
	ctx := context.Background()
	if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dashboard"}}); err != nil {
		t.Fatal(err)
	}
	p := policy("guardrails", "")
	p.Namespace = "dashboard"
	testenv.Eventually(t, "the Policy webhook to admit a Policy", func() (bool, string) {
		if err := cluster.Client.Create(ctx, p.DeepCopy()); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	body := scrape("the namespace's bundle published", func(b string) bool {
		return strings.Contains(b, `toolgate_bundle_frozen_agents{namespace="dashboard"}`)
	})
	testenv.RequireDashboardMetrics(t, "toolgate_bundle_", body)
	// Every toolgate metric of the operator (the injector's and the
	// webhooks' included) passes the Prometheus client's metric lint.
	t.Logf("promlint: %d toolgate_ metrics linted", testenv.RequireLintedMetrics(t, "toolgate_", body))
}
