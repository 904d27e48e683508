package sidecar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
)

const secretRequest = `{"tool_name":"Bash","agent_id":"agent-1","session_id":"sess-9","tool_use_id":"tu-1",
	"input":{"command":"deploy","password":"hunter2"},"kwargs":{"token":"tok-123","amount":5}}`

func TestDecisionLogLinesAndDefaultRedaction(t *testing.T) {
	s, base, rev, logs := denyBashLoggingToStdout(t)
	d := evaluate(t, base, secretRequest)
	evaluate(t, base, `{"tool_name":"Read\u0000\"x"}`)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); strings.Contains(out, "hunter2") || strings.Contains(out, "tok-123") || strings.Contains(out, "deploy") {
		t.Fatalf("the default decision log leaks request input:\n%s", out)
	}
	lines := logs.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), logs)
	}
	l := lines[0]
	if _, err := time.Parse(time.RFC3339Nano, l["time"].(string)); err != nil {
		t.Errorf("time: %v", err)
	}
	want := map[string]any{
		"decision_id": d.DecisionID, "session_id": "sess-9", "agent_id": "agent-1", "tool_name": "Bash",
		"tool_use_id": "tu-1", "decision": "deny", "effect": "deny", "matched_policy_id": "deny-tools",
		"matched_policy_version": 1.0, "matched_rule_id": "deny-0", "bundle_revision": rev,
	}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("%s = %v, want %v", k, l[k], v)
		}
	}
	if ms, ok := l["latency_ms"].(float64); !ok || ms <= 0 {
		t.Errorf("latency_ms = %v", l["latency_ms"])
	}
	for _, absent := range []string{"request", "requested_agent_id", "requested_roles", "requested_environment", "code", "warnings"} {
		if _, ok := l[absent]; ok {
			t.Errorf("unexpected %s in %v", absent, l)
		}
	}
	if lines[1]["tool_name"] != "Read\u0000\"x" || lines[1]["session_id"] != nil || lines[1]["matched_rule_id"] != nil || lines[1]["effect"] != "allow" {
		t.Errorf("second line: %v", lines[1])
	}
}

func TestLogFieldsReachTheDecisionLog(t *testing.T) {
	o := testOptions()
	logs := &lineBuffer{}
	o.DecisionLog, o.DecisionLogWriter = DecisionLogStdout, logs
	o.LogFields, o.Redact = []string{"input"}, []string{"input.password"}
	s, base := newTestServer(t, o)
	evaluate(t, base, secretRequest)
	_ = s.Close(t.Context())
	lines := logs.lines(t)
	want := map[string]any{"input": map[string]any{"command": "deploy", "password": decisionlog.Redacted}}
	if len(lines) != 1 || !reflect.DeepEqual(lines[0]["request"], want) {
		t.Errorf("logged request: %v, want %v", lines, want)
	}
}

// sinkRecorder is a decision log endpoint on loopback.
type sinkRecorder struct {
	mu      sync.Mutex
	batches [][]map[string]any
	hold    chan struct{} // when not nil, requests wait for it to close
	status  int
}

func (r *sinkRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.hold != nil {
		<-r.hold
	}
	var batch []map[string]any
	body, _ := io.ReadAll(req.Body)
	if err := json.Unmarshal(body, &batch); err != nil || req.Header.Get("Content-Type") != "application/json" {
		http.Error(w, fmt.Sprintf("not a JSON array: %v", err), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.batches = append(r.batches, batch)
	r.mu.Unlock()
	if r.status != 0 {
		w.WriteHeader(r.status)
	}
}

func (r *sinkRecorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, b := range r.batches {
		out = append(out, len(b))
	}
	return out
}

func sinkServer(t *testing.T, o Options, rec *sinkRecorder) *Server {
	t.Helper()
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	o.DecisionLogURL = hs.URL + "/decisions"
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func recordN(s *Server, n int) {
	for i := range n {
		s.d.Record(&decisionlog.Event{At: time.Now(), ID: uint64(i), ToolName: "Bash", Decision: engine.Allow})
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func TestHTTPSinkBatchesBySize(t *testing.T) {
	rec := &sinkRecorder{}
	s := sinkServer(t, testOptions(), rec)
	recordN(s, 250)
	eventually(t, "three batches", func() bool { return sum(rec.sizes()) == 250 })
	if got := rec.sizes(); len(got) != 3 || got[0] != 100 || got[1] != 100 || got[2] != 50 {
		t.Errorf("batch sizes %v, want [100 100 50] (the last one flushed by the timer)", got)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if first := rec.batches[0][0]; first["tool_name"] != "Bash" || first["decision"] != "allow" {
		t.Errorf("batched line: %v", first)
	}
}

func TestHTTPSinkFlushesAPartialBatchOnTheInterval(t *testing.T) {
	rec := &sinkRecorder{}
	o := testOptions()
	o.DecisionLogFlushInterval = 50 * time.Millisecond
	s := sinkServer(t, o, rec)
	defer func() { _ = s.Close(t.Context()) }()
	recordN(s, 3)
	eventually(t, "the timer flush", func() bool { return sum(rec.sizes()) == 3 })
	if got := rec.sizes(); len(got) != 1 {
		t.Errorf("batches %v, want one of 3", got)
	}
}

func TestHTTPSinkDropsWhenFullWithoutBlocking(t *testing.T) {
	rec := &sinkRecorder{hold: make(chan struct{})}
	o := testOptions()
	o.DecisionLogQueue, o.DecisionLogBatch = 10, 5
	s := sinkServer(t, o, rec)
	const total = 1000
	done := make(chan struct{})
	go func() {
		recordN(s, total)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("recording decisions blocked behind a stuck decision log sink")
	}
	dropped := testutil.ToFloat64(s.metrics.logDropped.WithLabelValues("http", "queue_full"))
	if dropped < float64(total-o.DecisionLogQueue-2*o.DecisionLogBatch) {
		t.Errorf("dropped %v of %d with a queue of %d", dropped, total, o.DecisionLogQueue)
	}
	close(rec.hold)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if delivered := sum(rec.sizes()); delivered+int(dropped) != total {
		t.Errorf("delivered %d + dropped %v != %d recorded", delivered, dropped, total)
	}
	if failed := testutil.ToFloat64(s.metrics.logDropped.WithLabelValues("http", "send_failed")); failed != 0 {
		t.Errorf("send_failed = %v", failed)
	}
}

func TestHTTPSinkCountsFailedBatches(t *testing.T) {
	rec := &sinkRecorder{status: http.StatusServiceUnavailable}
	s := sinkServer(t, testOptions(), rec)
	recordN(s, 120)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if failed := testutil.ToFloat64(s.metrics.logDropped.WithLabelValues("http", "send_failed")); failed != 120 {
		t.Errorf("send_failed = %v, want 120", failed)
	}
}

// stuckWriter blocks every Write until released, says when the first one
// has started, and counts the lines it was finally given.
type stuckWriter struct {
	entered chan struct{}
	once    sync.Once
	release chan struct{}
	mu      sync.Mutex
	lines   int
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	w.mu.Lock()
	w.lines += bytes.Count(p, []byte{'\n'})
	w.mu.Unlock()
	return len(p), nil
}

// The sink buffers lines and only calls Write when its queue runs dry, so
// the test first waits until the writer is provably stuck inside Write;
// from then on the queue holds exactly DecisionLogQueue events and every
// further one must be dropped, counted, and never delay a decision.
func TestStdoutLogDropsWhenFullWithoutBlocking(t *testing.T) {
	const queue, burst = 10, 100
	w := &stuckWriter{entered: make(chan struct{}), release: make(chan struct{})}
	o := testOptions()
	o.DecisionLog, o.DecisionLogWriter, o.DecisionLogQueue = DecisionLogStdout, w, queue
	s, base := newTestServer(t, o)
	if got := toolDecision(t, base, "Bash"); got != "deny/NO_POLICIES" {
		t.Fatalf("decision %s", got)
	}
	select {
	case <-w.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the stdout sink never wrote the first line")
	}
	for range burst {
		if got := toolDecision(t, base, "Bash"); got != "deny/NO_POLICIES" {
			t.Fatalf("decision %s", got)
		}
	}
	dropped := testutil.ToFloat64(s.metrics.logDropped.WithLabelValues("stdout", "queue_full"))
	if dropped != burst-queue {
		t.Errorf("dropped %v of %d with a queue of %d and a stuck writer, want %d", dropped, burst, queue, burst-queue)
	}
	close(w.release)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if want := 1 + queue; w.lines != want {
		t.Errorf("writer got %d lines after release, want %d (the first plus a full queue)", w.lines, want)
	}
}

// Labels and the request's framework tag every line, so lines from many
// clusters and pods can be told apart in one sink.
func TestDecisionLogLabelsAndFramework(t *testing.T) {
	o := testOptions()
	logs := &lineBuffer{}
	o.DecisionLog, o.DecisionLogWriter = DecisionLogStdout, logs
	o.LogLabels = []string{"cluster=prod-eu", "namespace=agents", "pod=bot-7f9c", "note=a=b, \"quoted\""}
	s, base := newTestServer(t, o)
	evaluate(t, base, `{"tool_name":"Bash","framework":"langchain"}`)
	evaluate(t, base, `{"tool_name":"Bash","framework":7}`)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	lines := logs.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), logs)
	}
	want := map[string]any{"cluster": "prod-eu", "namespace": "agents", "pod": "bot-7f9c", "note": `a=b, "quoted"`}
	for i, l := range lines {
		if !reflect.DeepEqual(l["labels"], want) {
			t.Errorf("line %d labels %v, want %v", i, l["labels"], want)
		}
	}
	if lines[0]["framework"] != "langchain" {
		t.Errorf("framework %v", lines[0]["framework"])
	}
	if _, ok := lines[1]["framework"]; ok {
		t.Errorf("a non-string framework was logged: %v", lines[1]["framework"])
	}
	// Label order is the flags' order.
	if i, j := strings.Index(logs.String(), `"cluster"`), strings.Index(logs.String(), `"pod"`); i < 0 || j < i {
		t.Errorf("labels out of order:\n%s", logs)
	}
}
