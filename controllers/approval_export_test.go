package controllers

import (
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// ApprovalsCount reads toolgate_approvals_total for one outcome.
func ApprovalsCount(outcome string) float64 {
	return testutil.ToFloat64(approvalsTotal.WithLabelValues(outcome))
}

// NoticesCount reads toolgate_approvals_notify_total for one result.
func NoticesCount(result string) float64 {
	return testutil.ToFloat64(approvalNotices.WithLabelValues(result))
}

// ApprovalsPending reads toolgate_approvals_pending for a namespace
// without creating the series, and says whether it exists.
func ApprovalsPending(ns string) (float64, bool) {
	return namespaceGauge(approvalsPending, ns)
}
