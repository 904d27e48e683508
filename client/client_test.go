package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/internal/clienttest"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/sidecar"
)

func TestClientDecidesOverTCPAndSocket(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), nil)
	for name, url := range map[string]string{"tcp": sc.TCP, "unix": sc.Unix} {
		t.Run(name, func(t *testing.T) {
			c := clienttest.NewClient(t, client.Options{URL: url})

			res := clienttest.Evaluate(t, c, client.Request{ToolName: "Read", AgentID: "coder-1",
				Input: map[string]any{"file_path": "/workspace/README.md"}})
			if !res.Allowed() || res.Code != "" || res.BundleRevision == "" || res.DecisionID == "" {
				t.Errorf("Read: got %+v, want an allow with a revision and a decision id", res)
			}

			res = clienttest.Evaluate(t, c, client.Request{ToolName: "Bash", AgentID: "coder-1", SessionID: "s-1",
				Input: map[string]any{"command": "rm -rf /"}, Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
			if res.Decision != engine.Deny || res.MatchedPolicyID != "bash-no-rm-rf" || res.MatchedRuleID != "no-rm-rf" ||
				res.MatchedPolicyVersion != 1 || res.Effect != engine.EffectDeny || res.Reason == "" {
				t.Errorf("rm -rf: got %+v, want deny by bash-no-rm-rf/no-rm-rf", res)
			}

			res = clienttest.Evaluate(t, c, clienttest.SampleRequest(t, "frozen_agent.json"))
			if res.Decision != engine.Deny || res.Code != engine.CodeAgentFrozen ||
				!strings.Contains(res.Reason, "INC-1042") {
				t.Errorf("frozen: got %+v, want deny AGENT_FROZEN with the freeze's reason", res)
			}
		})
	}
}

func TestClientNoBundle(t *testing.T) {
	sc := clienttest.StartSidecar(t, t.TempDir()+"/absent.json", nil)
	res := clienttest.Evaluate(t, clienttest.NewClient(t, client.Options{URL: sc.Unix}), client.Request{ToolName: "Read"})
	if res.Decision != engine.Deny || res.Code != engine.CodeNoPolicies {
		t.Errorf("got %+v, want deny NO_POLICIES", res)
	}
}

func TestClientFailsClosedWhenTheSidecarStops(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), nil)
	for _, url := range []string{sc.TCP, sc.Unix} {
		c := clienttest.NewClient(t, client.Options{URL: url})
		if res := clienttest.Evaluate(t, c, client.Request{ToolName: "Read"}); !res.Allowed() {
			t.Fatalf("%s before the stop: got %+v, want allow", url, res)
		}
		defer func(c *client.Client, url string) {
			// After the stop, on the connection kept alive before it.
			res := clienttest.Evaluate(t, c, client.Request{ToolName: "Read"})
			if res.Decision != engine.Deny || res.Code != client.CodeSidecarUnavailable || !strings.Contains(res.Reason, url) {
				t.Errorf("%s after the stop: got %+v, want deny SIDECAR_UNAVAILABLE naming the sidecar", url, res)
			}
			if c.FailOpenCount() != 0 {
				t.Errorf("FailOpenCount = %d without FailOpen", c.FailOpenCount())
			}
		}(c, url)
	}
	sc.Stop()
}

func TestClientFailOpenCounts(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), nil)
	c := clienttest.NewClient(t, client.Options{URL: sc.Unix, FailOpen: true})
	// A deny the sidecar makes is never overridden by FailOpen.
	if res := clienttest.Evaluate(t, c, clienttest.SampleRequest(t, "bash_rm_rf.json")); res.Decision != engine.Deny {
		t.Fatalf("rm -rf with FailOpen: got %+v, want the sidecar's deny", res)
	}
	sc.Stop()
	for i := 1; i <= 2; i++ {
		res := clienttest.Evaluate(t, c, clienttest.SampleRequest(t, "bash_rm_rf.json"))
		if !res.Allowed() || res.Code != client.CodeSidecarUnavailable || !strings.Contains(res.Reason, "fail open") {
			t.Errorf("call %d: got %+v, want allow SIDECAR_UNAVAILABLE (fail open)", i, res)
		}
		if got := c.FailOpenCount(); got != uint64(i) {
			t.Errorf("after call %d FailOpenCount = %d", i, got)
		}
	}
}

func TestClientTimeout(t *testing.T) {
	// A listener that accepts and never answers: a hung sidecar.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	c := clienttest.NewClient(t, client.Options{URL: "http://" + ln.Addr().String(), Timeout: 100 * time.Millisecond})
	start := time.Now()
	res := clienttest.Evaluate(t, c, client.Request{ToolName: "Read"})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Evaluate took %v with a 100ms timeout", took)
	}
	if res.Decision != engine.Deny || res.Code != client.CodeSidecarUnavailable || !strings.Contains(res.Reason, "no answer within 100ms") {
		t.Errorf("got %+v, want deny SIDECAR_UNAVAILABLE: no answer within 100ms", res)
	}
}

func TestClientCallerCancelIsAnError(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), nil)
	c := clienttest.NewClient(t, client.Options{URL: sc.TCP, FailOpen: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := c.Evaluate(ctx, client.Request{ToolName: "Read"})
	if err == nil || res.Decision != engine.Deny || c.FailOpenCount() != 0 {
		t.Errorf("got %+v, %v, count %d: want a deny, ctx's error, nothing failed open", res, err, c.FailOpenCount())
	}
}

func TestClientNon200FailsClosed(t *testing.T) {
	// The real sidecar answers 400 to a request past its element limit.
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), func(o *sidecar.Options) { o.MaxRequestElements = 4 })
	c := clienttest.NewClient(t, client.Options{URL: sc.TCP})
	res := clienttest.Evaluate(t, c, client.Request{ToolName: "Read", Input: map[string]any{"a": 1, "b": 2, "c": 3, "d": 4}})
	if res.Decision != engine.Deny || res.Code != client.CodeSidecarUnavailable || !strings.Contains(res.Reason, "status 400") {
		t.Errorf("got %+v, want deny SIDECAR_UNAVAILABLE naming status 400", res)
	}
}

func TestClientEmptyToolNameIsAnError(t *testing.T) {
	c := clienttest.NewClient(t, client.Options{URL: "http://127.0.0.1:1"})
	res, err := c.Evaluate(context.Background(), client.Request{})
	if err == nil || res.Decision != engine.Deny {
		t.Errorf("got %+v, %v: want a deny and an error", res, err)
	}
}

func TestDiscovery(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), nil)
	t.Setenv(client.EnvURL, sc.Unix)
	c := clienttest.NewClient(t, client.Options{})
	if c.URL() != sc.Unix {
		t.Errorf("with TOOLGATE_URL=%s the client asks %s", sc.Unix, c.URL())
	}
	if res := clienttest.Evaluate(t, c, client.Request{ToolName: "Read"}); !res.Allowed() {
		t.Errorf("through TOOLGATE_URL: got %+v, want allow", res)
	}
	// An explicit URL wins over the environment.
	if c := clienttest.NewClient(t, client.Options{URL: sc.TCP}); c.URL() != sc.TCP {
		t.Errorf("Options.URL %s: the client asks %s", sc.TCP, c.URL())
	}
	// unix:/path, as the sidecar's --listen takes it, works too.
	short := "unix:" + strings.TrimPrefix(sc.Unix, "unix://")
	if res := clienttest.Evaluate(t, clienttest.NewClient(t, client.Options{URL: short}), client.Request{ToolName: "Read"}); !res.Allowed() {
		t.Errorf("through %s: got %+v, want allow", short, res)
	}
	t.Setenv(client.EnvURL, "")
	want := client.DefaultURL
	if clienttest.FileExists(client.DefaultSocket) {
		want = "unix://" + client.DefaultSocket
	}
	if c := clienttest.NewClient(t, client.Options{}); c.URL() != want {
		t.Errorf("with nothing set the client asks %s, want %s", c.URL(), want)
	}
}

func TestNewRejectsMalformedURLs(t *testing.T) {
	for _, raw := range []string{"ftp://host:1", "127.0.0.1:8181", "unix://relative.sock", "unix:", "http://", "http://h:1/?q=1", "http://[::1"} {
		if _, err := client.New(client.Options{URL: raw}); err == nil || !strings.Contains(err.Error(), "Options.URL") {
			t.Errorf("client.New(URL %q): got %v, want an error naming Options.URL", raw, err)
		}
	}
	t.Setenv(client.EnvURL, "tcp://x")
	if _, err := client.New(client.Options{}); err == nil || !strings.Contains(err.Error(), client.EnvURL) {
		t.Errorf("New with TOOLGATE_URL=tcp://x: got %v, want an error naming TOOLGATE_URL", err)
	}
	if _, err := client.New(client.Options{URL: client.DefaultURL, Timeout: -time.Second}); err == nil {
		t.Error("New accepted a negative timeout")
	}
}

// Answers that are not decisions fail closed. The server here stands in
// for whatever wrongly answers on the sidecar's address (a proxy, another
// service); the sidecar itself never answers so.
func TestClientMalformedAnswerFailsClosed(t *testing.T) {
	for _, body := range []string{"not json", `{"decision":"maybe"}`, `{}`, `[1]`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(body))
		}))
		res := clienttest.Evaluate(t, clienttest.NewClient(t, client.Options{URL: srv.URL}), client.Request{ToolName: "Read"})
		srv.Close()
		if res.Decision != engine.Deny || res.Code != client.CodeSidecarUnavailable {
			t.Errorf("answer %q: got %+v, want deny SIDECAR_UNAVAILABLE", body, res)
		}
	}
}

// TestTraceparentReachesTheDecisionLog: Request.Traceparent travels as the
// traceparent header, and the sidecar logs the caller's trace and span ids.
func TestTraceparentReachesTheDecisionLog(t *testing.T) {
	var logs syncBuffer
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), func(o *sidecar.Options) { o.DecisionLogWriter = &logs })
	c := clienttest.NewClient(t, client.Options{URL: sc.Unix})
	req := client.Request{ToolName: "Read", SessionID: "s-1", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	clienttest.Evaluate(t, c, req)
	sc.Stop() // flushes the decision log
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(logs.String())), &line); err != nil {
		t.Fatalf("decision log %q: %v", logs.String(), err)
	}
	if line["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || line["span_id"] != "00f067aa0ba902b7" {
		t.Errorf("decision log line %v lacks the caller's trace", line)
	}
}

// syncBuffer is a bytes.Buffer the sidecar's log writer and the test may
// share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestClientEvaluateJSON: a request held as JSON is decided as Evaluate
// decides its Request, a body the sidecar refuses is a deny naming why,
// and no sidecar is a deny, fail closed.
func TestClientEvaluateJSON(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), nil)
	c := clienttest.NewClient(t, client.Options{URL: sc.TCP})
	for _, name := range []string{"bash_rm_rf.json", "bash_git_status.json"} {
		doc, err := os.ReadFile(filepath.Join(clienttest.Samples, "requests", name))
		if err != nil {
			t.Fatal(err)
		}
		want := clienttest.Evaluate(t, c, clienttest.RequestOf(t, doc))
		got, err := c.EvaluateJSON(context.Background(), doc)
		if err != nil || got.Decision != want.Decision || got.MatchedRuleID != want.MatchedRuleID || got.BundleRevision != want.BundleRevision || got.DecisionID == "" {
			t.Errorf("%s: EvaluateJSON %+v, %v; Evaluate %+v", name, got, err, want)
		}
	}
	for _, body := range []string{`not json`, `{"tool_name":"Read"`, `[]`} {
		res, err := c.EvaluateJSON(context.Background(), []byte(body))
		if err != nil || res.Decision != engine.Deny || res.Code != client.CodeSidecarUnavailable || !strings.Contains(res.Reason, "status 400") {
			t.Errorf("body %q: got %+v, %v; want deny SIDECAR_UNAVAILABLE with the sidecar's 400", body, res, err)
		}
	}
	sc.Stop()
	if res, err := c.EvaluateJSON(context.Background(), []byte(`{"tool_name":"Read"}`)); err != nil || res.Decision != engine.Deny || res.Code != client.CodeSidecarUnavailable {
		t.Errorf("after the stop: got %+v, %v; want deny SIDECAR_UNAVAILABLE", res, err)
	}
}
