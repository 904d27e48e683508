package chart

import (
	"slices"
	"strings"
	"testing"
)

// TestPrometheusRule: off by default; when on, every alert has a name, an
// expression, a known severity and a summary. (That the metrics exist is
// checked where they are defined: controllers/ and sidecar/.)
func TestPrometheusRule(t *testing.T) {
	t.Parallel()
	if n := len(all(render(t), "PrometheusRule")); n != 0 {
		t.Errorf("PrometheusRule rendered by default (%d); its CRD may not exist", n)
	}
	pr := find(t, render(t, nonDefault...), "PrometheusRule", "")
	groups, _ := field(t, pr, "spec", "groups").([]any)
	var names []string
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			rule := r.(map[string]any)
			name, _ := rule["alert"].(string)
			expr, _ := rule["expr"].(string)
			labels, _ := rule["labels"].(map[string]any)
			annotations, _ := rule["annotations"].(map[string]any)
			if name == "" || !strings.Contains(expr, "toolgate_") {
				t.Errorf("rule %v: no alert name, or an expression on no toolgate metric", rule)
			}
			if sev := labels["severity"]; !slices.Contains([]any{"info", "warning", "critical"}, sev) {
				t.Errorf("%s: severity %v", name, sev)
			}
			if s, _ := annotations["summary"].(string); s == "" || strings.Contains(s, "{{`") {
				t.Errorf("%s: summary %q (Prometheus templates must survive Helm's)", name, s)
			}
			names = append(names, name)
		}
	}
	for _, want := range []string{"ToolgatePolicyCompileErrors", "ToolgateAgentFrozen", "ToolgateSidecarWithoutBundle", "ToolgateDecisionLogDropping", "ToolgateSidecarUsageUnavailable",
		"ToolgateApprovalNoticesFailing"} {
		if !slices.Contains(names, want) {
			t.Errorf("alerts %v lack %s", names, want)
		}
	}
}
