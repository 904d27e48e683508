package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/internal/clienttest"
	"github.com/toolgate/toolgate/engine"
)

// recorder forwards to a real sidecar and keeps each request body: what
// the client sent, as the sidecar read it.
type recorder struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func startRecorder(t *testing.T, sidecarURL string) (*recorder, string) {
	t.Helper()
	target, err := url.Parse(sidecarURL)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the request: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("the request %q is not a JSON object: %v", body, err)
		}
		rec.mu.Lock()
		rec.bodies = append(rec.bodies, m)
		rec.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

func (r *recorder) last(t *testing.T) map[string]any {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) == 0 {
		t.Fatal("no request reached the sidecar")
	}
	return r.bodies[len(r.bodies)-1]
}

func payOver(amount float64) client.Request {
	return client.Request{ToolName: "pay", AgentID: "shop-agent", Kwargs: map[string]any{"amount": amount}}
}

// A sidecar with no API server cannot ask anyone: an ask rule's call is
// denied APPROVAL_UNAVAILABLE, with the rule, whether the client waits or
// names an approval. Wait travels as a Go duration string and approval as
// the name, and neither is read as a field of the call (the sidecar would
// answer 400 to a wait it cannot read).
func TestClientAskWithoutApprovalsIsDenied(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.BundleOf(t, clienttest.AskPolicy), nil)
	rec, via := startRecorder(t, sc.TCP)
	c := clienttest.NewClient(t, client.Options{URL: via})
	for _, tc := range []struct {
		name     string
		req      client.Request
		wait     any
		approval any
	}{
		{"no wait", payOver(5000), nil, nil},
		{"wait", func() client.Request { r := payOver(5000); r.Wait = 90 * time.Second; return r }(), "1m30s", nil},
		{"approval", func() client.Request { r := payOver(5000); r.Approval = "pay-x7k2"; return r }(), nil, "pay-x7k2"},
	} {
		res := clienttest.Evaluate(t, c, tc.req)
		if res.Allowed() || res.Asked() || res.Decision != engine.Deny || res.Code != approval.CodeUnavailable ||
			res.MatchedRuleID != "pay-over-cap" || !strings.Contains(res.Reason, "cannot ask") {
			t.Errorf("%s: got %+v, want deny APPROVAL_UNAVAILABLE by pay-over-cap saying it cannot ask", tc.name, res)
		}
		sent := rec.last(t)
		if sent["wait"] != tc.wait || sent["approval"] != tc.approval || sent["tool_name"] != "pay" {
			t.Errorf("%s: sent %v, want wait %v and approval %v", tc.name, sent, tc.wait, tc.approval)
		}
	}
	if res := clienttest.Evaluate(t, c, payOver(10)); !res.Allowed() || res.Asked() {
		t.Errorf("pay 10: got %+v, want allow", res)
	}
}

// A negative wait is the caller's mistake: an error, a deny, and nothing
// sent.
func TestClientNegativeWaitIsAnError(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.BundleOf(t, clienttest.AskPolicy), nil)
	rec, via := startRecorder(t, sc.TCP)
	c := clienttest.NewClient(t, client.Options{URL: via})
	req := payOver(5000)
	req.Wait = -time.Second
	res, err := c.Evaluate(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "Request.Wait -1s is negative") || res.Allowed() {
		t.Errorf("got %+v, %v; want a deny and an error naming Request.Wait", res, err)
	}
	if _, err := req.MarshalJSON(); err == nil {
		t.Error("MarshalJSON wrote a negative wait")
	}
	if len(rec.bodies) != 0 {
		t.Errorf("sent %v for a negative wait", rec.bodies)
	}
}

// An ask answer is kept as it is (not read as "not a decision"): not
// allowed, Asked, naming its ApprovalRequest. The server stands in for a
// sidecar with an API server, which this test has not; the envtest
// end-to-end test asks a real one.
func TestClientReadsAnAsk(t *testing.T) {
	const ask = `{"decision":"ask","effect":"ask","matchedPolicyId":"pay-cap","matchedPolicyVersion":1,"matchedRuleId":"pay-over-cap","code":"APPROVAL_REQUIRED","reason":"payments over 1000 need a human approval","latencyMs":0.01,"approval":{"name":"pay-x7k2","namespace":"agents","expiresAt":"2026-12-01T10:05:00Z"},"decisionId":"d-1"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(ask)) }))
	t.Cleanup(srv.Close)
	c := clienttest.NewClient(t, client.Options{URL: srv.URL, FailOpen: true})
	res := clienttest.Evaluate(t, c, payOver(5000))
	want := engine.ApprovalRef{Name: "pay-x7k2", Namespace: "agents", ExpiresAt: time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC)}
	if res.Allowed() || !res.Asked() || res.Decision != engine.Ask || res.Code != engine.CodeApprovalRequired ||
		res.Approval == nil || !res.Approval.ExpiresAt.Equal(want.ExpiresAt) || res.Approval.Name != want.Name ||
		res.Approval.Namespace != want.Namespace || c.FailOpenCount() != 0 {
		t.Errorf("got %+v (approval %+v), want an ask naming %+v, not counted as fail-open", res, res.Approval, want)
	}
	if out, err := json.Marshal(res); err != nil || string(out) != ask {
		t.Errorf("written back: %s, %v; want %s", out, err, ask)
	}
}

// A decision this client does not know is not an allow: fail closed, even
// from a well-formed answer.
func TestClientUnknownDecisionIsNotAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"decision":"escalate","effect":"escalate","matchedPolicyId":null,"matchedPolicyVersion":null,"matchedRuleId":null,"latencyMs":0.01}`))
	}))
	t.Cleanup(srv.Close)
	res := clienttest.Evaluate(t, clienttest.NewClient(t, client.Options{URL: srv.URL}), payOver(5000))
	if res.Allowed() || res.Asked() || res.Decision != engine.Deny || res.Code != client.CodeSidecarUnavailable ||
		!strings.Contains(res.Reason, `"escalate", not allow, deny or ask`) {
		t.Errorf("got %+v, want deny SIDECAR_UNAVAILABLE naming the unknown decision", res)
	}
}

// The client waits Options.Timeout plus Request.Wait: a sidecar holding
// the answer for a person is not taken for a hung one. The server stands
// in for a sidecar whose person answers after 300ms.
func TestClientTimeoutCoversTheWait(t *testing.T) {
	var waits []any
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		waits = append(waits, m["wait"])
		mu.Unlock()
		time.Sleep(300 * time.Millisecond)
		_, _ = w.Write([]byte(`{"decision":"allow","effect":"ask","matchedPolicyId":"pay-cap","matchedPolicyVersion":1,"matchedRuleId":"pay-over-cap","reason":"approved by alice","latencyMs":0.01}`))
	}))
	t.Cleanup(srv.Close)
	c := clienttest.NewClient(t, client.Options{URL: srv.URL, Timeout: 100 * time.Millisecond})
	req := payOver(5000)
	req.Wait = 2 * time.Second
	if res := clienttest.Evaluate(t, c, req); !res.Allowed() || res.Reason != "approved by alice" {
		t.Errorf("with a 2s wait: got %+v, want the allow answered after 300ms", res)
	}
	req.Wait = 0
	if res := clienttest.Evaluate(t, c, req); res.Allowed() || res.Code != client.CodeSidecarUnavailable || !strings.Contains(res.Reason, "no answer within 100ms") {
		t.Errorf("without a wait: got %+v, want deny SIDECAR_UNAVAILABLE past the 100ms timeout", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 2 || waits[0] != "2s" || waits[1] != nil {
		t.Errorf("sent waits %v, want 2s then none", waits)
	}
}
