package v1alpha1

// The operator summarises sidecars' decisions into one policy report per
// namespace (docs/reports.md). The webhook that injects sidecars and the
// operator that reads their decisions share these names.
const (
	// ReportsAudience is the audience of the projected ServiceAccount token
	// a sidecar sends with its decision log batches to the operator's
	// reports endpoint: a token for this audience only, which the API
	// server refuses, so a token seen on the way cannot act on the cluster.
	ReportsAudience = "toolgate.dev/reports"
	// ReportName names the report the operator keeps in each namespace.
	ReportName = "toolgate"
	// ReportSource is the source of the report and of each of its results.
	ReportSource = "toolgate"
	// ReportsPath is the reports endpoint's path on the operator.
	ReportsPath = "/v1/decisions"
	// LabelReportsReceiver ("true") marks the manager Pod whose endpoint
	// receives decisions: the leader's, the one that writes reports. The
	// chart's reports Service selects it, so sidecars never send to a
	// replica that would count what nobody writes.
	LabelReportsReceiver = "toolgate.dev/reports-receiver"
)
