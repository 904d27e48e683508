package testenv

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// RequireLintedMetrics fails t on every problem the Prometheus client's
// metric lint (promlint, what `promtool check metrics` runs) finds in a
// metric starting with prefix on exposition, a /metrics page: a counter
// without _total, a unit that is not a base unit, a name in camelCase. The
// libraries' own metrics (go_, process_, controller-runtime's) are
// theirs to lint. It returns how many of prefix's metrics it linted.
func RequireLintedMetrics(t testing.TB, prefix, exposition string) int {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(exposition)).Lint()
	if err != nil {
		t.Fatalf("promlint cannot read the exposition: %v", err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, prefix) {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
	linted := map[string]bool{}
	for _, l := range strings.Split(exposition, "\n") {
		if name, ok := strings.CutPrefix(l, "# TYPE "); ok {
			if name, _, _ = strings.Cut(name, " "); strings.HasPrefix(name, prefix) {
				linted[name] = true
			}
		}
	}
	if len(linted) == 0 {
		t.Errorf("the exposition has no %s metric to lint", prefix)
	}
	return len(linted)
}
