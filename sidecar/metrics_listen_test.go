package sidecar

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --metrics-listen serves what Prometheus and kubelet need on a second
// address, and no decisions there.
func TestMetricsListenerServesOpsOnly(t *testing.T) {
	doc, rev := encode(t, denyTools("Bash"))
	file := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.BundleFile, o.MetricsListen = file, "127.0.0.1:0"
	addrs := make(chan net.Addr, 1)
	o.onMetricsListen = func(a net.Addr) { addrs <- a }
	base := startRun(t, o)
	ops := "http://" + (<-addrs).String()

	// Run listens before the source has loaded the file.
	eventually(t, "the bundle on the metrics address", func() bool { return readyRevision(t, ops) == rev })
	if got := toolDecision(t, base, "Bash"); got != "deny" {
		t.Fatalf("decision on --listen: %s", got)
	}
	if status, body := get(t, ops+"/healthz"); status != 200 || !strings.Contains(body, "ok") {
		t.Errorf("healthz: %d %s", status, body)
	}
	if n := metricValue(t, ops, "toolgate_sidecar_decisions_total"); n != 1 {
		t.Errorf("decisions counted on the metrics address: %v, want 1", n)
	}
	status, body := post(t, ops+"/v1/evaluate", `{"tool_name":"Bash"}`)
	if status != 404 || !strings.Contains(string(body), "decisions are on --listen") {
		t.Errorf("evaluate on the metrics address: %d %s", status, body)
	}
}

func TestMetricsListenMistakes(t *testing.T) {
	for _, tc := range []struct{ listen, metrics, want string }{
		{"127.0.0.1:8181", "127.0.0.1:8181", "must differ"},
		{"127.0.0.1:8181", "9191", "--metrics-listen"},
		{"127.0.0.1:8181", "unix:", "--metrics-listen"},
		{"127.0.0.1:8181", ":http", "--metrics-listen"},
	} {
		o := testOptions()
		o.BundleFile, o.Listen, o.MetricsListen = "b.json", []string{tc.listen}, tc.metrics
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--listen %s --metrics-listen %s: %v, want %q", tc.listen, tc.metrics, err, tc.want)
		}
	}
}

// A metrics address already taken fails Run with the flag's name, and the
// decision listener it had opened is released.
func TestMetricsListenInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	o := testOptions()
	o.BundleFile, o.Listen, o.MetricsListen = filepath.Join(t.TempDir(), "b.json"), []string{"127.0.0.1:0"}, taken.Addr().String()
	err = Run(t.Context(), o, nil)
	if err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Fatalf("Run with a taken metrics address: %v", err)
	}
}
