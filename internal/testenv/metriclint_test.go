package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }

// TestRequireLintedMetricsFindsProblems: the lint the metric tests run
// fails on what promtool check metrics refuses, for the prefix's metrics
// only, and passes a clean page.
func TestRequireLintedMetricsFindsProblems(t *testing.T) {
	bad := `# HELP toolgate_calls Calls decided.
# TYPE toolgate_calls counter
toolgate_calls 0
# HELP toolgate_latency_milliseconds Decision latency.
# TYPE toolgate_latency_milliseconds gauge
toolgate_latency_milliseconds 1
# HELP other_calls Not ours.
# TYPE other_calls counter
other_calls 0
`
	r := &recorder{TB: t}
	if n := RequireLintedMetrics(r, "toolgate_", bad); n != 2 {
		t.Errorf("linted %d metrics, want 2", n)
	}
	got := strings.Join(r.errors, "\n")
	for _, want := range []string{"toolgate_calls: counter metrics should have \"_total\" suffix", "toolgate_latency_milliseconds: use base unit \"seconds\" instead of \"milliseconds\""} {
		if !strings.Contains(got, want) {
			t.Errorf("lint errors %q miss %q", got, want)
		}
	}
	if strings.Contains(got, "other_calls") {
		t.Errorf("another prefix's metric was linted: %q", got)
	}

	clean := "# HELP toolgate_calls_total Calls decided.\n# TYPE toolgate_calls_total counter\ntoolgate_calls_total 0\n"
	r = &recorder{TB: t}
	if RequireLintedMetrics(r, "toolgate_", clean); len(r.errors) != 0 {
		t.Errorf("a clean page failed the lint: %q", r.errors)
	}
	r = &recorder{TB: t}
	if RequireLintedMetrics(r, "toolgate_", "# TYPE go_goroutines gauge\ngo_goroutines 1\n"); len(r.errors) != 1 {
		t.Errorf("a page without the prefix's metrics passed: %q", r.errors)
	}
}
