package promql

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// TestDashboardQueriesParse: every query of the chart's Grafana dashboard
// is PromQL that Prometheus accepts and reads toolgate metrics only (that
// those are exported is checked where they are: sidecar
// TestAlertSeriesExistAtStart, test/e2e TestOperatorAlertSeriesExistAtStart).
func TestDashboardQueriesParse(t *testing.T) {
	raw, err := os.ReadFile("../../charts/toolgate/dashboards/toolgate.json")
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
		t.Fatal(err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	pql := parser.NewParser(parser.Options{})
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			expr, err := pql.ParseExpr(tg.Expr)
			if err != nil {
				t.Errorf("panel %q: %s: %v", p.Title, tg.Expr, err)
				continue
			}
			for _, sel := range parser.ExtractSelectors(expr) {
				for _, lm := range sel {
					if lm.Name == "__name__" && !strings.HasPrefix(lm.Value, "toolgate_") {
						t.Errorf("panel %q reads %s, which toolgate does not export", p.Title, lm.Value)
					}
				}
			}
		}
	}
}
