package sidecar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
)

func TestEvaluateRejectsMalformedInputWith400(t *testing.T) {
	s, base := newTestServer(t, testOptions())
	doc, _ := encode(t, denyTools("Bash"))
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, query, body, want string
	}{
		{"empty body", "", "", "not valid JSON"},
		{"malformed JSON", "", `{"tool_name":`, "not valid JSON"},
		{"not JSON at all", "", `tool_name=Bash`, "not valid JSON"},
		{"array", "", `[{"tool_name":"Bash"}]`, "must be a JSON object"},
		{"string", "", `"Bash"`, "must be a JSON object"},
		{"number", "", `42`, "must be a JSON object"},
		{"null", "", `null`, "must be a JSON object"},
		{"missing tool_name", "", `{"agent_id":"a"}`, "tool_name is required"},
		{"numeric tool_name", "", `{"tool_name":5}`, "tool_name must be a string"},
		{"null tool_name", "", `{"tool_name":null}`, "tool_name must be a string"},
		{"object tool_name", "", `{"tool_name":{"x":1}}`, "tool_name must be a string"},
		// A known field spelled another way is refused as toolgate eval
		// refuses it (engine.Request.Validate, the one check).
		{"agentId for agent_id", "", `{"tool_name":"Bash","agentId":"a"}`, `unknown field "agentId": did you mean "agent_id"?`},
		{"toolName for tool_name", "", `{"toolName":"Bash"}`, `unknown field "toolName": did you mean "tool_name"?`},
		{"trailing data", "", `{"tool_name":"Bash"} {}`, "trailing data"},
		{"bad explain", "?explain=maybe", `{"tool_name":"Bash"}`, "explain"},
		{"bad query escape", "?explain=%zz", `{"tool_name":"Bash"}`, "query"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, data := post(t, base+"/v1/evaluate"+tc.query, tc.body)
			assertJSONError(t, status, http.StatusBadRequest, data, tc.want)
		})
	}
	if got := testutil.ToFloat64(s.metrics.BadRequests); got != float64(len(cases)) {
		t.Errorf("bad_requests_total = %v, want %d", got, len(cases))
	}
	if got := sumOf(t, s.metrics.Decisions); got != 0 {
		t.Errorf("malformed requests were counted as %v decisions", got)
	}
}

func assertJSONError(t *testing.T, status, want int, data []byte, contains string) {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, want %d: %s", status, want, data)
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(data, &e); err != nil || e.Error == "" {
		t.Fatalf("body is not a JSON error (%v): %s", err, data)
	}
	if !strings.Contains(e.Error, contains) {
		t.Errorf("error %q does not mention %q", e.Error, contains)
	}
}

// sizedRequest is a valid request of exactly n bytes.
func sizedRequest(n int) []byte {
	head, tail := `{"tool_name":"Bash","input":{"pad":"`, `"}}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

func TestEvaluateBodyLimitIsOneMiB(t *testing.T) {
	_, base := newTestServer(t, testOptions())
	send := func(body []byte, chunked bool) (int, []byte) {
		t.Helper()
		var r io.Reader = bytes.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // hides the length: sent chunked
		}
		req, err := http.NewRequest(http.MethodPost, base+"/v1/evaluate", r)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			if status, data := send(sizedRequest(MaxRequestBytes), chunked); status != http.StatusOK {
				t.Errorf("a body of exactly 1 MiB: status %d: %s", status, data)
			}
			status, data := send(sizedRequest(MaxRequestBytes+1), chunked)
			assertJSONError(t, status, http.StatusBadRequest, data, "limit")
		})
	}
}

func TestWrongMethodsAndPaths(t *testing.T) {
	_, base := newTestServer(t, testOptions())
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/v1/evaluate", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPut, "/v1/evaluate", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodDelete, "/readyz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodPost, "/v1/evaluat", http.StatusNotFound, ""},
		{http.MethodGet, "/", http.StatusNotFound, ""},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(`{"tool_name":"Bash"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assertJSONError(t, resp.StatusCode, tc.status, data, "")
		if got := resp.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}

func TestFailsClosedUntilABundleIsLoadedAndReadyzFlips(t *testing.T) {
	s, base := newTestServer(t, testOptions())
	if status, _ := get(t, base+"/healthz"); status != http.StatusOK {
		t.Errorf("healthz %d before a bundle, want 200 (alive)", status)
	}
	if status, body := get(t, base+"/readyz"); status != http.StatusServiceUnavailable {
		t.Errorf("readyz %d before a bundle, want 503: %s", status, body)
	}
	d := evaluate(t, base, `{"tool_name":"Read","agent_id":"agent-1"}`)
	if d.Decision != engine.Deny || d.Code != engine.CodeNoPolicies || d.BundleRevision != nil {
		t.Errorf("before a bundle: %+v (revision %v), want deny NO_POLICIES with a null revision", d.Result, d.BundleRevision)
	}

	doc, rev := encode(t, denyTools("Bash"))
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	if status, body := get(t, base+"/readyz"); status != http.StatusOK || !strings.Contains(body, rev) {
		t.Errorf("readyz after loading: %d %s", status, body)
	}
	d = evaluate(t, base, `{"tool_name":"Bash"}`)
	if d.Decision != engine.Deny || d.MatchedRuleID != "deny-0" || d.BundleRevision == nil || *d.BundleRevision != rev {
		t.Errorf("Bash: %+v, revision %v", d.Result, d.BundleRevision)
	}
	if got := toolDecision(t, base, "Read"); got != "allow" {
		t.Errorf("Read: %s, want allow", got)
	}

	s.loader.Unload("test", "source deleted")
	if status, _ := get(t, base+"/readyz"); status != http.StatusServiceUnavailable {
		t.Errorf("readyz %d after unload, want 503", status)
	}
	if got := toolDecision(t, base, "Read"); got != "deny/NO_POLICIES" {
		t.Errorf("Read after unload: %s, want deny/NO_POLICIES", got)
	}
}

func TestExplainAddsTheTrace(t *testing.T) {
	s, base := newTestServer(t, testOptions())
	doc, _ := encode(t, denyTools("Write", "Bash"))
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	plain := evaluate(t, base, `{"tool_name":"Bash"}`)
	if plain.Trace != nil {
		t.Errorf("trace without explain: %+v", plain.Trace)
	}
	for _, q := range []string{"?explain=true", "?explain=1", "?foo=bar&explain=TRUE"} {
		status, data := post(t, base+"/v1/evaluate"+q, `{"tool_name":"Bash"}`)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", q, status, data)
		}
		d := decodeDecision(t, data)
		if len(d.Trace) == 0 || !d.Trace[len(d.Trace)-1].Matched || d.Trace[len(d.Trace)-1].RuleID != "deny-1" {
			t.Errorf("%s: trace %+v does not end at the matching rule deny-1", q, d.Trace)
		}
	}
	if d := evaluate(t, base, `{"tool_name":"Bash"}`+"\n"); d.Trace != nil {
		t.Error("trace without explain after explained requests")
	}
	status, data := post(t, base+"/v1/evaluate?explain=false", `{"tool_name":"Bash"}`)
	if status != http.StatusOK || bytes.Contains(data, []byte(`"trace"`)) {
		t.Errorf("explain=false: %d %s", status, data)
	}
}

func TestAgentIdentityIsOverriddenAndTheMismatchLogged(t *testing.T) {
	o := testOptions()
	o.AgentID = "agent-a"
	logs := &lineBuffer{}
	o.DecisionLog, o.DecisionLogWriter = DecisionLogStdout, logs
	s, base := newTestServer(t, o)
	b := denyTools("Bash")
	b.FrozenAgents = []engine.FrozenAgent{{ID: "agent-a", Reason: "incident 7"}}
	doc, _ := encode(t, b)
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	bodies := []string{
		`{"tool_name":"Read","agent_id":"agent-b","session_id":"s1"}`, // another agent's id: still agent-a, frozen
		`{"tool_name":"Read","session_id":"s2"}`,                      // no id: agent-a
		`{"tool_name":"Read","agent_id":"agent-a","session_id":"s3"}`, // its own id
		`{"tool_name":"Read","agent_id":{"n":1},"session_id":"s4"}`,   // not a string
	}
	for _, body := range bodies {
		if d := evaluate(t, base, body); d.Code != engine.CodeAgentFrozen {
			t.Errorf("%s: %+v, want deny AGENT_FROZEN for the sidecar's own frozen agent", body, d.Result)
		}
	}
	_ = s.Close(t.Context())
	want := map[string]any{"s1": "agent-b", "s2": nil, "s3": nil, "s4": `{"n":1}`}
	lines := logs.lines(t)
	if len(lines) != len(bodies) {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(bodies), logs)
	}
	for _, l := range lines {
		if l["agent_id"] != "agent-a" {
			t.Errorf("logged agent_id %v, want agent-a: %v", l["agent_id"], l)
		}
		if got := l["requested_agent_id"]; got != want[l["session_id"].(string)] {
			t.Errorf("session %v: requested_agent_id %v, want %v", l["session_id"], got, want[l["session_id"].(string)])
		}
	}
	if got := testutil.ToFloat64(s.metrics.IdentityMismatches); got != 2 {
		t.Errorf("agent_id_overrides_total = %v, want 2", got)
	}
}

func TestAPanicInTheHandlerIsADenyWithACode(t *testing.T) {
	s, base, rev, logs := denyBashLoggingToStdout(t)
	s.d.Config().BeforeEvaluate = func(r engine.Request) {
		if r["tool_name"] == "boom" {
			panic("injected failure")
		}
	}
	d := evaluate(t, base, `{"tool_name":"boom","session_id":"s1"}`)
	if d.Decision != engine.Deny || d.Code != CodeInternalError || d.BundleRevision == nil || *d.BundleRevision != rev {
		t.Errorf("after a panic: %+v, want deny %s", d.Result, CodeInternalError)
	}
	if got := toolDecision(t, base, "Read"); got != "allow" {
		t.Errorf("the next request: %s, want allow (the server must survive)", got)
	}
	if got := testutil.ToFloat64(s.metrics.InternalErrors); got != 1 {
		t.Errorf("internal_errors_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.metrics.Common[decide.DecisionKey{Decision: engine.Deny, Code: CodeInternalError, Effect: engine.EffectDeny}]); got != 1 {
		t.Errorf("decisions_total{deny,INTERNAL_ERROR} = %v, want 1", got)
	}
	_ = s.Close(t.Context())
	lines := logs.lines(t)
	if len(lines) != 2 || lines[0]["code"] != string(CodeInternalError) || lines[0]["session_id"] != "s1" || lines[0]["effect"] != "deny" {
		t.Errorf("decision log: %v", lines)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	s, base := newTestServer(t, testOptions())
	doc, rev := encode(t, denyTools("Bash"))
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	if err := s.LoadDocument([]byte(`{"schemaVersion":1`), false); err == nil {
		t.Fatal("a truncated bundle loaded")
	}
	toolDecision(t, base, "Bash")
	toolDecision(t, base, "Bash")
	toolDecision(t, base, "Read")
	status, body := get(t, base+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("metrics: %d", status)
	}
	for _, want := range []string{
		`toolgate_sidecar_decisions_total{code="",decision="deny",effect="deny"} 2`,
		`toolgate_sidecar_decisions_total{code="",decision="allow",effect="allow"} 1`,
		`toolgate_sidecar_decision_duration_seconds_count 3`,
		fmt.Sprintf(`toolgate_sidecar_bundle_info{revision=%q} 1`, rev),
		`toolgate_sidecar_bundle_loaded 1`,
		`toolgate_sidecar_bundle_reload_failures_total{source="api"} 1`,
		`toolgate_sidecar_bundle_age_seconds `,
		`toolgate_sidecar_bundle_last_load_timestamp_seconds `,
		`toolgate_sidecar_internal_errors_total 0`,
		`go_goroutines `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Small requests, the fast path, never touch the body budget.
func TestSmallBodiesTakeNothingFromTheBudget(t *testing.T) {
	o := testOptions()
	reserved := 0
	o.onBodyReserve = func(int64) { reserved++ }
	s, base := newTestServer(t, o)
	doc, _ := encode(t, denyTools("Bash"))
	must(t, s.LoadDocument(doc, false))
	for _, body := range []string{`{"tool_name":"Read"}`, `{"tool_name":"Read","pad":"` + strings.Repeat("x", 60<<10) + `"}`} {
		if d := evaluate(t, base, body); d.Decision != engine.Allow {
			t.Errorf("%d bytes: %+v", len(body), d.Result)
		}
	}
	if reserved != 0 || s.d.Bodies.Held() != 0 {
		t.Errorf("%d reservations, %d bytes in flight", reserved, s.d.Bodies.Held())
	}
}
