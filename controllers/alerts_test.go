package controllers

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// Every operator metric the chart's alerts watch exists.
func TestAlertsWatchExportedMetrics(t *testing.T) {
	testenv.RequireAlertMetrics(t, "toolgate_bundle_", bundleSizeBytes, bundleRules, bundlePolicies, bundleFrozenAgents,
		compileErrors, publishesTotal, publishSeconds)
	testenv.RequireAlertMetrics(t, "toolgate_approvals_", approvalsTotal, approvalsPending, approvalNotices)
}
