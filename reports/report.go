package reports

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// The report formats (--reports-format, the chart's reports.format).
const (
	// FormatOpenReports writes openreports.io/v1alpha1 Reports, which
	// Kyverno 1.15+ and Kubewarden write and Policy Reporter 3.2+ reads.
	FormatOpenReports = "openreports"
	// FormatWGPolicy writes wgpolicyk8s.io/v1alpha2 PolicyReports, the
	// policy working group's format, for older readers.
	FormatWGPolicy = "wgpolicyk8s"
)

// The kinds each format writes.
var (
	OpenReportsGVK = schema.GroupVersionKind{Group: "openreports.io", Version: "v1alpha1", Kind: "Report"}
	WGPolicyGVK    = schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"}
)

// CheckFormat refuses a format this version cannot write.
func CheckFormat(f string) error {
	if f != FormatOpenReports && f != FormatWGPolicy {
		return fmt.Errorf("%q: the format must be %s or %s", f, FormatOpenReports, FormatWGPolicy)
	}
	return nil
}

// GVK is the kind format writes.
func GVK(format string) schema.GroupVersionKind {
	if format == FormatWGPolicy {
		return WGPolicyGVK
	}
	return OpenReportsGVK
}

// Build is namespace ns's report of results over window, in format: one
// result per policy, rule and outcome, whose properties hold how many
// decisions it counts and the newest one's agent and tool; the summary
// counts decisions by outcome.
func Build(format, ns string, results []Result, window time.Duration) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(GVK(format))
	u.SetNamespace(ns)
	u.SetName(v1alpha1.ReportName)
	u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "toolgate"})
	summary := map[string]any{ResultPass: int64(0), ResultFail: int64(0), ResultWarn: int64(0), "error": int64(0), ResultSkip: int64(0)}
	list := make([]any, 0, len(results))
	for _, r := range results {
		summary[r.Result] = summary[r.Result].(int64) + r.Count
		props := map[string]any{
			"count": strconv.FormatInt(r.Count, 10),
			"agent": r.Agent,
			"tool":  r.Tool,
		}
		if r.Kind != "" {
			props["kind"] = r.Kind
		}
		list = append(list, map[string]any{
			"source":     v1alpha1.ReportSource,
			"policy":     r.Policy,
			"rule":       r.Rule,
			"result":     r.Result,
			"category":   "tool calls",
			"message":    message(r, window),
			"timestamp":  map[string]any{"seconds": r.Last.Unix(), "nanos": int64(r.Last.Nanosecond())},
			"properties": props,
		})
	}
	if format == FormatOpenReports {
		u.Object["source"] = v1alpha1.ReportSource
	}
	u.Object["summary"] = summary
	u.Object["results"] = list
	return u
}

var verbs = map[string]string{ResultPass: "allowed", ResultFail: "denied", ResultWarn: "allowed with a warning", ResultSkip: "matched in audit mode"}

func message(r Result, window time.Duration) string {
	calls := "calls"
	if r.Count == 1 {
		calls = "call"
	}
	agent := r.Agent
	if agent == "" {
		agent = "an unnamed agent"
	}
	return fmt.Sprintf("%d %s %s in the last %s; the last: %s calling %s", r.Count, calls, verbs[r.Result], shortDuration(window), agent, r.Tool)
}

// shortDuration writes 1h for time.Hour, not 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
