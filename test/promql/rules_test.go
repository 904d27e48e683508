// Package promql checks the chart's alert expressions with Prometheus's own
// PromQL parser. It is a module of its own, as test/regodiff is for OPA, so
// that Prometheus is no dependency of toolgate.
package promql

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

var exprLine = regexp.MustCompile(`(?m)^\s*expr:\s*(.+)$`)

// TestAlertExpressionsParse: every expr of the chart's PrometheusRule is
// PromQL that Prometheus accepts, and reads only toolgate metrics.
func TestAlertExpressionsParse(t *testing.T) {
	raw, err := os.ReadFile("../../charts/toolgate/templates/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pql := parser.NewParser(parser.Options{})
	exprs := exprLine.FindAllStringSubmatch(string(raw), -1)
	if len(exprs) == 0 {
		t.Fatal("no expr: in the PrometheusRule: the pattern is stale")
	}
	for _, m := range exprs {
		e := strings.TrimSpace(m[1])
		expr, err := pql.ParseExpr(e)
		if err != nil {
			t.Errorf("%s: %v", e, err)
			continue
		}
		for _, sel := range parser.ExtractSelectors(expr) {
			for _, lm := range sel {
				if lm.Name == "__name__" && !strings.HasPrefix(lm.Value, "toolgate_") {
					t.Errorf("%s reads %s, which toolgate does not export", e, lm.Value)
				}
			}
		}
	}
	if _, err := pql.ParseExpr("increase(toolgate_sidecar_decisions_total[5m] > 0"); err == nil {
		t.Error("the parser accepts a malformed expression: the test proves nothing")
	}
}
