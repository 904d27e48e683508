package sidecar

import (
	"net/http"
	"strings"
	"testing"
)

// TestDecisionLogRecordsTraceparent: a decision's log line carries the
// caller's trace and span ids; a malformed header (or two) is ignored and
// the call decided as ever.
func TestDecisionLogRecordsTraceparent(t *testing.T) {
	o := testOptions()
	logs := &lineBuffer{}
	o.DecisionLog, o.DecisionLogWriter = DecisionLogStdout, logs
	s, base := newTestServer(t, o)
	send := func(headers ...string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/evaluate", strings.NewReader(`{"tool_name":"Bash"}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range headers {
			req.Header.Add("traceparent", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	valid := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	send(valid)
	send("00-not-a-trace")
	send(valid, valid)
	send()
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	lines := logs.lines(t)
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), logs)
	}
	if lines[0]["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || lines[0]["span_id"] != "00f067aa0ba902b7" {
		t.Errorf("valid traceparent logged as trace %v span %v", lines[0]["trace_id"], lines[0]["span_id"])
	}
	for i, l := range lines[1:] {
		if _, ok := l["trace_id"]; ok {
			t.Errorf("line %d has a trace id from a missing, malformed or repeated header: %v", i+1, l)
		}
	}
}
