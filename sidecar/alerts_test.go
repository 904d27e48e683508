package sidecar

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// Every sidecar metric the chart's alerts watch exists.
func TestAlertsWatchExportedMetrics(t *testing.T) {
	used, err := testenv.AlertMetricNames(metricPrefix)
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics(func() float64 { return 0 })
	exported := testenv.DescribedNames(m.decisions, m.latency, m.badRequests, m.internalErrors, m.identityMismatches,
		m.bundleInfo, m.bundleLoaded, m.lastLoad, m.reloads, m.reloadFailures, m.logDropped)
	if len(used) == 0 {
		t.Fatal("the chart's alerts use no sidecar metric: the name pattern is stale")
	}
	for _, name := range used {
		if !exported[name] {
			t.Errorf("an alert watches %s, which the sidecar does not export", name)
		}
	}
}
