package sidecar

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAlertSeriesExistAtStart: a fresh sidecar's /metrics already holds,
// at 0, every counter series the chart's alerts take the increase() or
// rate() of (OVERLOADED and USAGE_UNAVAILABLE decisions, reload failures
// of every source, decision log drops of its sink). A series first
// exported at 1 would make increase() miss the first event: before this,
// bundle_reload_failures_total had no series until a failure.
func TestAlertSeriesExistAtStart(t *testing.T) {
	dir := t.TempDir()
	doc, _ := encode(t, denyTools("Bash"))
	must(t, os.WriteFile(filepath.Join(dir, "bundle.json"), doc, 0o644))
	o := testOptions()
	o.BundleFile = filepath.Join(dir, "bundle.json")
	o.DecisionLog = DecisionLogStdout
	o.DecisionLogWriter = io.Discard
	// An MCP upstream, so the proxy's metrics exist (it is never called).
	o.MCP.Listen = "127.0.0.1:0"
	o.MCP.Upstreams = []string{"files=http://127.0.0.1:1/mcp"}
	base := startRun(t, o)
	eventually(t, "the bundle loaded", func() bool { return readyRevision(t, base) != "" })
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	testenv.RequireAlertSeriesAtZero(t, metricPrefix, string(body))
	// And every sidecar metric the chart's Grafana dashboard queries.
	testenv.RequireDashboardMetrics(t, metricPrefix, string(body))
	// And every one of them passes the Prometheus client's metric lint.
	t.Logf("promlint: %d %s metrics linted", testenv.RequireLintedMetrics(t, metricPrefix, string(body)), metricPrefix)
}
