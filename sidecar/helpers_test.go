package sidecar

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/usage"
)

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// denyTools is a bundle whose one policy denies the named tools and allows
// everything else.
func denyTools(tools ...string) engine.Bundle { return testenv.DenyTools(tools...) }

func encode(t testing.TB, b engine.Bundle) ([]byte, string) {
	t.Helper()
	return testenv.Encode(t, b)
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	return testenv.Gzipped(t, b)
}

// lineBuffer collects decision log output safely across goroutines.
type lineBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything written so far.
func (l *lineBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// lines parses every complete line as a JSON object, failing on any that
// is not one.
func (l *lineBuffer) lines(t testing.TB) []map[string]any {
	t.Helper()
	l.mu.Lock()
	data := append([]byte(nil), l.buf.Bytes()...)
	l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("decision log line is not a JSON object: %v\n%s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testOptions() Options {
	o := DefaultOptions()
	o.Logger = quietLogger()
	o.DecisionLog = DecisionLogNone
	return o
}

// newTestServer serves s on a real loopback listener.
func newTestServer(t testing.TB, o Options) (*Server, string) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		_ = s.Close(t.Context())
	})
	return s, hs.URL
}

type decisionResponse struct {
	engine.Result
	BundleRevision *string `json:"bundleRevision"`
	DecisionID     string  `json:"decisionId"`
}

// evaluate posts body and decodes a 200 decision.
func evaluate(t testing.TB, base, body string) decisionResponse {
	t.Helper()
	status, data := post(t, base+"/v1/evaluate", body)
	if status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", status, data)
	}
	d := decodeDecision(t, data)
	if d.DecisionID == "" {
		t.Fatalf("decision has no decisionId: %s", data)
	}
	return d
}

// decodeDecision decodes in two passes: engine.Result's own UnmarshalJSON
// would otherwise be promoted and swallow the sidecar's extra fields.
func decodeDecision(t testing.TB, data []byte) decisionResponse {
	t.Helper()
	var d decisionResponse
	if err := json.Unmarshal(data, &d.Result); err != nil {
		t.Fatalf("response is not a decision: %v: %s", err, data)
	}
	var extra struct {
		BundleRevision *string `json:"bundleRevision"`
		DecisionID     string  `json:"decisionId"`
	}
	if err := json.Unmarshal(data, &extra); err != nil {
		t.Fatalf("response is not a decision: %v: %s", err, data)
	}
	d.BundleRevision, d.DecisionID = extra.BundleRevision, extra.DecisionID
	return d
}

func post(t testing.TB, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// eventually polls cond: reloads are asynchronous (file events, watches).
// The timeout is a hang guard, not a latency assertion.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, func() (bool, string) { return cond(), "still not" })
}

// toolDecision asks about one tool and returns its decision, and the
// sidecar's own code when it decided.
func toolDecision(t testing.TB, base, tool string) string {
	t.Helper()
	d := evaluate(t, base, fmt.Sprintf(`{"tool_name":%q,"agent_id":"agent-1"}`, tool))
	// A rule's deny is coded by the rule's id; the sidecar's own codes
	// (NO_POLICIES, AGENT_FROZEN ...) are what these tests tell apart.
	if d.Code != "" && string(d.Code) != d.MatchedRuleID {
		return string(d.Decision) + "/" + string(d.Code)
	}
	return string(d.Decision)
}

// sumOf adds up every series of a metric vector.
func sumOf(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1024)
	c.Collect(ch)
	close(ch)
	sum := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		sum += d.GetCounter().GetValue() + d.GetGauge().GetValue()
	}
	return sum
}

// denyBashLoggingToStdout is a test server that writes its decision log
// (stdout sink) to logs and serves a bundle denying Bash, of revision rev.
func denyBashLoggingToStdout(t *testing.T) (s *Server, base, rev string, logs *lineBuffer) {
	t.Helper()
	o := testOptions()
	logs = &lineBuffer{}
	o.DecisionLog, o.DecisionLogWriter = DecisionLogStdout, logs
	s, base = newTestServer(t, o)
	var doc []byte
	doc, rev = encode(t, denyTools("Bash"))
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	return s, base, rev, logs
}

// newTestMetrics are metrics of no server.
func newTestMetrics() *metrics {
	l, err := usage.New(usage.DefaultMaxKeys, usage.DefaultMaxEventsPerKey)
	if err != nil {
		panic(err)
	}
	return newMetrics(func() float64 { return 0 }, func() float64 { return 0 }, l)
}
