package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// askPolicy is the ask rule the clients' tests share: pay over 1000 asks.
var askPolicy = filepath.Join("..", "clients", "testdata", "pay-ask.yaml")

const (
	payEvent      = `{"hook_event_name":"PreToolUse","session_id":"s-1","tool_name":"pay","tool_input":{"amount":5000},"tool_use_id":"toolu_1"}`
	smallPayEvent = `{"hook_event_name":"PreToolUse","tool_name":"pay","tool_input":{"amount":10}}`
	askReason     = "toolgate asks a person about pay: rule pay-over-cap (policy pay-cap): payments over 1000 need a human approval"
)

// Deciding locally there is no ApprovalRequest to wait on: an ask is
// Claude Code's own ask, with the rule's reason, for the person at the
// terminal.
func TestHookAskBundleDir(t *testing.T) {
	d := hookDecisionOf(t, run(t, payEvent, "hook", "claude-code", "--bundle-dir", askPolicy))
	if d.PermissionDecision != "ask" || d.PermissionDecisionReason != askReason {
		t.Errorf("pay 5000: %+v, want ask %q", d, askReason)
	}
	if d := hookDecisionOf(t, run(t, smallPayEvent, "hook", "claude-code", "--bundle-dir", askPolicy)); d.PermissionDecision != "allow" {
		t.Errorf("pay 10: %+v, want allow", d)
	}
}

// answer is what a stand-in sidecar answers one request: body, after delay.
type answer struct {
	body  string
	delay time.Duration
}

// standIn records each request body, then answers the i-th with
// answers[i] (the last one repeats): it stands in for a sidecar that
// reads an API server, which this package's tests have not (the envtest
// end-to-end test has). forward, when set, serves every request instead.
type standIn struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func startStandIn(t *testing.T, forward http.Handler, answers ...answer) (*standIn, string) {
	t.Helper()
	s := &standIn{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("request %q: %v", body, err)
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, m)
		n := len(s.bodies)
		s.mu.Unlock()
		if forward != nil {
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			forward.ServeHTTP(w, r)
			return
		}
		a := answers[min(n, len(answers))-1]
		time.Sleep(a.delay)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// sent is what each request since the last call carried about waiting:
// its wait and approval.
func (s *standIn) sent() [][2]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][2]any
	for _, b := range s.bodies {
		out = append(out, [2]any{b["wait"], b["approval"]})
	}
	s.bodies = nil
	return out
}

// A sidecar's ask, without --wait, is Claude Code's ask: the person at
// the terminal decides, told the rule, its reason and the ApprovalRequest.
// With --wait the hook sends the call again naming its ApprovalRequest,
// with the wait, and waits past --timeout for that answer: the person's
// decision on Kubernetes.
func TestHookAskThroughASidecar(t *testing.T) {
	ask := answer{body: `{"decision":"ask","effect":"ask","matchedPolicyId":"pay-cap","matchedPolicyVersion":1,"matchedRuleId":"pay-over-cap","code":"APPROVAL_REQUIRED","reason":"payments over 1000 need a human approval","latencyMs":0.01,"approval":{"name":"pay-x7k2","namespace":"agents","expiresAt":"2026-12-01T10:05:00Z"}}`}
	// Approved 500ms after the call is sent again: past --timeout, within --wait.
	approved := answer{`{"decision":"allow","effect":"ask","matchedPolicyId":"pay-cap","matchedPolicyVersion":1,"matchedRuleId":"pay-over-cap","reason":"approved by alice","latencyMs":0.01,"approval":{"name":"pay-x7k2","namespace":"agents","expiresAt":"2026-12-01T10:05:00Z"}}`, 500 * time.Millisecond}
	denied := answer{body: `{"decision":"deny","effect":"ask","matchedPolicyId":"pay-cap","matchedPolicyVersion":1,"matchedRuleId":"pay-over-cap","code":"APPROVAL_DENIED","reason":"denied by alice: not this month","latencyMs":0.01}`}
	none, again := [2]any{nil, nil}, [2]any{"5s", "pay-x7k2"}

	s, u := startStandIn(t, nil, ask, approved)
	d := hookDecisionOf(t, run(t, payEvent, "hook", "claude-code", "--url", u))
	if want := askReason + " (ApprovalRequest agents/pay-x7k2)"; d.PermissionDecision != "ask" || d.PermissionDecisionReason != want {
		t.Errorf("ask: %+v, want ask %q", d, want)
	}
	if sent := s.sent(); !reflect.DeepEqual(sent, [][2]any{none}) {
		t.Errorf("without --wait the hook sent %v, want one request without wait or approval", sent)
	}

	d = hookDecisionOf(t, run(t, payEvent, "hook", "claude-code", "--url", u, "--wait", "5s", "--timeout", "200ms"))
	if d.PermissionDecision != "allow" || !strings.Contains(d.PermissionDecisionReason, "approved by alice") {
		t.Errorf("approved with --wait 5s --timeout 200ms: %+v, want allow", d)
	}
	if sent := s.sent(); !reflect.DeepEqual(sent, [][2]any{none, again}) {
		t.Errorf("with --wait 5s the hook sent %v, want the call, then the call with its approval and the wait", sent)
	}

	s, u = startStandIn(t, nil, ask, denied)
	d = hookDecisionOf(t, run(t, payEvent, "hook", "claude-code", "--url", u, "--wait", "5s"))
	if d.PermissionDecision != "deny" || !strings.HasSuffix(d.PermissionDecisionReason, "rule pay-over-cap (policy pay-cap): APPROVAL_DENIED: denied by alice: not this month") {
		t.Errorf("denied: %+v", d)
	}
	if sent := s.sent(); !reflect.DeepEqual(sent, [][2]any{none, again}) {
		t.Errorf("denied: sent %v", sent)
	}
}

// The real sidecar, reading its bundle from a file, has no API server to
// ask with: the hook's call is denied APPROVAL_UNAVAILABLE at once,
// waiting or not.
func TestHookAskRealSidecarWithoutApprovals(t *testing.T) {
	dir := t.TempDir()
	b := run(t, "", "bundle", "-f", askPolicy)
	if b.code != 0 {
		t.Fatalf("bundle: exit %d: %s", b.code, b.stderr)
	}
	bundleFile := filepath.Join(dir, "bundle.json")
	if err := os.WriteFile(bundleFile, []byte(b.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeLoopbackAddr(t)
	sc := exec.Command(toolgateBinary(t), "sidecar", "--bundle-file", bundleFile, "--decision-log", "none", "--listen", addr)
	logFile, err := os.Create(filepath.Join(dir, "sidecar.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	sc.Stdout, sc.Stderr = logFile, logFile
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Process.Kill(); _ = sc.Wait() })
	testenv.Eventually(t, "the sidecar is ready", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	target, err := url.Parse("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	s, u := startStandIn(t, httputil.NewSingleHostReverseProxy(target))
	for _, args := range [][]string{nil, {"--wait", "90s"}} {
		d := hookDecisionOf(t, run(t, payEvent, append([]string{"hook", "claude-code", "--url", u}, args...)...))
		if d.PermissionDecision != "deny" || !strings.Contains(d.PermissionDecisionReason, "toolgate denied pay: rule pay-over-cap (policy pay-cap): APPROVAL_UNAVAILABLE: this call needs a person's approval, and this sidecar cannot ask for one") {
			t.Errorf("%v: %+v, want deny by pay-over-cap: the sidecar cannot ask", args, d)
		}
		// Denied at once: nothing to wait for, so one request.
		if sent := s.sent(); !reflect.DeepEqual(sent, [][2]any{{nil, nil}}) {
			t.Errorf("%v: sent %v, want one request without wait or approval", args, sent)
		}
	}
}
