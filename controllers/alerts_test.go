package controllers

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// Every operator metric the chart's alerts watch exists.
func TestAlertsWatchExportedMetrics(t *testing.T) {
	used, err := testenv.AlertMetricNames("toolgate_bundle_")
	if err != nil {
		t.Fatal(err)
	}
	exported := testenv.DescribedNames(bundleSizeBytes, bundleRules, bundlePolicies, bundleFrozenAgents,
		compileErrors, publishesTotal, publishSeconds)
	if len(used) == 0 {
		t.Fatal("the chart's alerts use no operator metric: the name pattern is stale")
	}
	for _, name := range used {
		if !exported[name] {
			t.Errorf("an alert watches %s, which the operator does not export", name)
		}
	}
}
