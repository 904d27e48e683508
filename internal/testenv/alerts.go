package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
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

// alertSelector is one metric an alert expression reads, with its label
// matchers (label="value" only).
type alertSelector struct {
	metric string
	labels map[string]string
}

var (
	alertExpr     = regexp.MustCompile(`(?m)^\s*expr:\s*(.+)$`)
	alertSel      = regexp.MustCompile(`([a-z_]+)(\{([^}]*)\})?`)
	alertMatchers = regexp.MustCompile(`([a-z_]+)="([^"]*)"`)
)

// alertCounterSelectors are the counters (names ending _total) starting
// with prefix that the chart's alert expressions read, with their label
// matchers: the series an increase() or rate() must find at 0 before the
// first event, or the alert misses it.
func alertCounterSelectors(prefix string) ([]alertSelector, error) {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "charts", "toolgate", "templates", "prometheusrule.yaml"))
	if err != nil {
		return nil, err
	}
	var out []alertSelector
	for _, e := range alertExpr.FindAllStringSubmatch(string(raw), -1) {
		for _, m := range alertSel.FindAllStringSubmatch(e[1], -1) {
			if !strings.HasPrefix(m[1], prefix) || !strings.HasSuffix(m[1], "_total") {
				continue
			}
			sel := alertSelector{metric: m[1], labels: map[string]string{}}
			for _, lm := range alertMatchers.FindAllStringSubmatch(m[3], -1) {
				sel.labels[lm[1]] = lm[2]
			}
			out = append(out, sel)
		}
	}
	return out, nil
}

// RequireAlertSeriesAtZero fails t unless exposition (a /metrics page in
// the text format) holds, for every counter starting with prefix that an
// alert reads, a series matching the alert's label matchers; and unless
// every such series is 0, exposition being that of a process that has
// seen no event yet.
func RequireAlertSeriesAtZero(t testing.TB, prefix, exposition string) {
	t.Helper()
	sels, err := alertCounterSelectors(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(sels) == 0 {
		t.Fatalf("the chart's alerts read no %s counter: the pattern is stale", prefix)
	}
	lines := strings.Split(exposition, "\n")
	for _, sel := range sels {
		found := false
		for _, l := range lines {
			name, rest, ok := cutSeries(l)
			if !ok || name != sel.metric {
				continue
			}
			labels, value := rest[0], rest[1]
			match := true
			for k, v := range sel.labels {
				if !strings.Contains(labels, k+`="`+v+`"`) {
					match = false
				}
			}
			if !match {
				continue
			}
			found = true
			if value != "0" {
				t.Errorf("%s%s is %s on a process that has seen no event", name, labels, value)
			}
		}
		if !found {
			t.Errorf("no series of %s matching %v at start: an alert on its increase() would miss the first event", sel.metric, sel.labels)
		}
	}
}

var exposedSeries = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)

// cutSeries splits an exposition line "name{labels} value" into its name
// and [labels, value]; false for comments and blank lines.
func cutSeries(line string) (string, [2]string, bool) {
	m := exposedSeries.FindStringSubmatch(line)
	if m == nil {
		return "", [2]string{}, false
	}
	return m[1], [2]string{m[2], m[3]}, true
}

// DashboardExpressions are the PromQL expressions of the chart's Grafana
// dashboard (charts/toolgate/dashboards/toolgate.json), panel by panel.
func DashboardExpressions(t testing.TB) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "charts", "toolgate", "dashboards", "toolgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// RequireDashboardMetrics fails t unless every metric starting with prefix
// that a dashboard query reads is in exposition (a /metrics page of the
// process that exports it): a histogram's _bucket, _sum and _count are
// its series.
func RequireDashboardMetrics(t testing.TB, prefix, exposition string) {
	t.Helper()
	exported := map[string]bool{}
	for _, l := range strings.Split(exposition, "\n") {
		if name, _, ok := cutSeries(l); ok {
			exported[name] = true
		}
	}
	names := regexp.MustCompile(regexp.QuoteMeta(prefix) + `[a-z_]+`)
	read := 0
	for _, e := range DashboardExpressions(t) {
		for _, n := range names.FindAllString(e, -1) {
			read++
			if !exported[n] {
				t.Errorf("the dashboard reads %s (%s), which the process does not export", n, e)
			}
		}
	}
	if read == 0 {
		t.Errorf("the dashboard reads no %s metric", prefix)
	}
}
