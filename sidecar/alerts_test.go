package sidecar

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// Every sidecar metric the chart's alerts watch exists.
func TestAlertsWatchExportedMetrics(t *testing.T) {
	m := newTestMetrics()
	testenv.RequireAlertMetrics(t, metricPrefix, m.Decisions, m.Latency, m.BadRequests, m.InternalErrors,
		m.IdentityMismatches, m.bundle.BundleInfo, m.bundle.BundleLoaded, m.bundle.LastLoad, m.bundle.Reloads, m.bundle.ReloadFailures, m.logDropped,
		m.listenerUp, m.connsOpen, m.connsEvicted, m.connsRefused, m.TraceTruncated,
		m.bundle.FrozenWatchFailures, m.bundle.ClusterFrozenWatchFailures)
}
