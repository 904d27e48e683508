package chart

import (
	"encoding/json"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestGrafanaDashboardConfigMap: metrics.grafanaDashboard.enabled renders
// one ConfigMap, where Grafana's sidecar looks (its label, the namespace
// given), holding dashboards/toolgate.json unchanged; off by default.
func TestGrafanaDashboardConfigMap(t *testing.T) {
	if n := len(all(render(t), "ConfigMap")); n != 0 {
		t.Errorf("by default the chart renders %d ConfigMaps, want none", n)
	}
	cm := find(t, render(t, nonDefault...), "ConfigMap", "")
	if cm.GetNamespace() != "monitoring" || cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap in %q labelled %v", cm.GetNamespace(), cm.GetLabels())
	}
	want, err := os.ReadFile("../../charts/toolgate/dashboards/toolgate.json")
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "toolgate.json")
	var got, wantDoc any
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("the ConfigMap's toolgate.json is not JSON: %v", err)
	}
	if err := json.Unmarshal(want, &wantDoc); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(wantDoc)
	if string(a) != string(b) {
		t.Error("the ConfigMap's dashboard differs from dashboards/toolgate.json")
	}
}
