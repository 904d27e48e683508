package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// RequireAlertMetrics fails t unless every metric starting with prefix that
// the chart's PrometheusRule watches is described by one of cs: the
// packages that define metrics call it, so a renamed metric or a misspelled
// alert fails where the metric lives.
func RequireAlertMetrics(t testing.TB, prefix string, cs ...prometheus.Collector) {
	t.Helper()
	used, err := alertMetricNames(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 {
		t.Fatalf("the chart's alerts use no %s metric: the name pattern is stale", prefix)
	}
	exported := describedNames(cs...)
	for _, name := range used {
		if !exported[name] {
			t.Errorf("an alert watches %s, which is not exported", name)
		}
	}
}

// alertMetricNames returns the metric names starting with prefix that the
// chart's PrometheusRule uses.
func alertMetricNames(prefix string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "charts", "toolgate", "templates", "prometheusrule.yaml"))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(regexp.QuoteMeta(prefix)+`[a-z_]+`).FindAllString(string(raw), -1) {
		seen[m] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// describedNames are the metric names the collectors describe, series or
// not (a vector without children still describes itself).
func describedNames(cs ...prometheus.Collector) map[string]bool {
	names := map[string]bool{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
			}
		}
	}
	return names
}
