package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// AlertMetricNames returns the metric names starting with prefix that the
// chart's PrometheusRule uses, so the packages that define the metrics can
// check that every alert watches something they export.
func AlertMetricNames(prefix string) ([]string, error) {
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

// DescribedNames are the metric names the collectors describe, series or
// not (a vector without children still describes itself).
func DescribedNames(cs ...prometheus.Collector) map[string]bool {
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
