package controllers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
)

// receiver is a notice endpoint on 127.0.0.1 that answers with the codes
// of answer in turn (the last one from then on) and records what it got.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	answer   []int
	requests []received
}

type received struct {
	method, path, auth, contentType string
	notice                          controllers.Notice
	// keys are the body's JSON keys, sorted: the wire contract.
	keys []string
	err  error
}

func newReceiver(t *testing.T, answer ...int) *receiver {
	t.Helper()
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got := received{method: req.Method, path: req.URL.Path, auth: req.Header.Get("Authorization"), contentType: req.Header.Get("Content-Type")}
		body, err := io.ReadAll(req.Body)
		if err == nil {
			err = json.Unmarshal(body, &got.notice)
		}
		var raw map[string]any
		if err == nil {
			err = json.Unmarshal(body, &raw)
		}
		got.keys = slices.Sorted(maps.Keys(raw))
		got.err = err
		r.mu.Lock()
		r.requests = append(r.requests, got)
		code := r.answer[min(len(r.requests), len(r.answer))-1]
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.requests...)
}

func authFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A new request is POSTed to the notify URL as JSON with the auth
// header from the file; the receiver answers 500 twice, and the third
// attempt, after backoff, delivers it. Exactly one notice is counted
// sent, and nothing more is sent once delivered.
func TestApprovalNoticeRetriedUntilDelivered(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-approval-")
	rcv := newReceiver(t, http.StatusInternalServerError, http.StatusInternalServerError, http.StatusOK)
	sent, failed := controllers.NoticesCount("sent"), controllers.NoticesCount("failed")
	startManager(t, controllers.Options{Approvals: controllers.ApprovalOptions{
		NotifyURL: rcv.URL + "/hooks/toolgate", NotifyAuthHeaderFile: authFile(t, "Bearer t0ken\n"), NotifyBackoff: 100 * time.Millisecond,
	}}, ns)
	ar := approvalRequest(ns, "pay-1", time.Hour)
	create(t, ar)

	testenv.Eventually(t, "the notice delivered on the third attempt", func() (bool, string) {
		return controllers.NoticesCount("sent")-sent == 1, fmt.Sprintf("%d requests", len(rcv.got()))
	})
	time.Sleep(300 * time.Millisecond) // a fourth attempt would come after 400ms of backoff; none must
	got := rcv.got()
	if len(got) != 3 {
		t.Fatalf("the receiver got %d requests, want 3 (500, 500, 200)", len(got))
	}
	want := controllers.Notice{Name: "pay-1", Namespace: ns, Agent: "shop-agent", Tool: "pay", Server: "payments",
		Preview: `{"kwargs":{"amount":5000}}`, Reason: "payments over 1000 need a human approval", ExpiresAt: ar.Spec.ExpiresAt.UTC(),
		ApproveCommand: "toolgate approve pay-1 -n " + ns,
		KubectlCommand: "kubectl patch approvalrequest pay-1 -n " + ns +
			` --subresource=status --type=merge -p '{"status":{"decision":"Approved","decidedBy":"<you>"}}'`}
	keys := []string{"action", "agent", "approveCommand", "expiresAt", "kubectlCommand", "name", "namespace", "preview", "reason", "server", "tool"}
	for i, r := range got {
		if !slices.Equal(r.keys, keys) {
			t.Errorf("request %d: keys %v, want %v", i+1, r.keys, keys)
		}
		if r.err != nil || r.method != http.MethodPost || r.path != "/hooks/toolgate" || r.auth != "Bearer t0ken" || r.contentType != "application/json" {
			t.Errorf("request %d: %s %s auth %q type %q, body error %v", i+1, r.method, r.path, r.auth, r.contentType, r.err)
		}
		if r.notice != want {
			t.Errorf("request %d: notice\n %+v\nwant\n %+v", i+1, r.notice, want)
		}
	}
	if n := controllers.NoticesCount("failed") - failed; n != 0 {
		t.Errorf("%v notices counted failed", n)
	}
	// A decision is no new request: nothing more is sent.
	patchApprovalStatus(t, ns, "pay-1", `{"decision":"Approved","decidedBy":"alice"}`)
	waitForApprovalReady(t, ns, "pay-1", v1alpha1.ReasonApproved)
	time.Sleep(300 * time.Millisecond)
	if n := len(rcv.got()); n != 3 {
		t.Errorf("%d requests after the decision, want still 3", n)
	}
}

// A receiver that always fails gets NotifyAttempts tries, then the notice
// counts failed; a request that expires before the next try ends its
// retries early (nobody could approve it any more).
func TestApprovalNoticeGivesUp(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-approval-")
	rcv := newReceiver(t, http.StatusServiceUnavailable)
	failed := controllers.NoticesCount("failed")
	startManager(t, controllers.Options{Approvals: controllers.ApprovalOptions{
		NotifyURL: rcv.URL, NotifyAttempts: 3, NotifyBackoff: 50 * time.Millisecond,
	}}, ns)
	create(t, approvalRequest(ns, "pay-1", time.Hour))
	testenv.Eventually(t, "the notice failed", func() (bool, string) {
		return controllers.NoticesCount("failed")-failed == 1, fmt.Sprintf("%d requests", len(rcv.got()))
	})
	if n := len(rcv.got()); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}

	// Two seconds to live, four of backoff: one attempt only.
	ns2 := testenv.Namespace(t, k8s, "tg-approval-")
	rcv2 := newReceiver(t, http.StatusServiceUnavailable)
	startManager(t, controllers.Options{Approvals: controllers.ApprovalOptions{
		NotifyURL: rcv2.URL, NotifyAttempts: 5, NotifyBackoff: 4 * time.Second,
	}}, ns2)
	create(t, approvalRequest(ns2, "pay-2", 2*time.Second))
	testenv.Eventually(t, "the expiring notice failed", func() (bool, string) {
		return controllers.NoticesCount("failed")-failed == 2, fmt.Sprintf("%d requests", len(rcv2.got()))
	})
	if n := len(rcv2.got()); n != 1 {
		t.Errorf("%d attempts for a request expiring before the second, want 1", n)
	}
}

// A receiver that accepts connections and never answers holds no
// reconcile: with both workers stuck and the queue full, every new request
// still gets its condition and its Event at once, a decision is still
// reflected, the notices past the queue are counted dropped, and the
// manager stops promptly.
func TestApprovalNoticeReceiverHangingNeverBlocks(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-approval-")
	release := make(chan struct{})
	var mu sync.Mutex
	arrived := 0
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		arrived++
		mu.Unlock()
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) }) // runs first: unblocks the handlers so Close returns
	dropped := controllers.NoticesCount("dropped")
	mgr := startManager(t, controllers.Options{Approvals: controllers.ApprovalOptions{
		NotifyURL: hung.URL, NotifyTimeout: time.Minute, NotifyQueueSize: 1,
	}}, ns)

	const n = 8
	start := time.Now()
	for i := range n {
		create(t, approvalRequest(ns, fmt.Sprintf("pay-%d", i), time.Hour))
	}
	for i := range n {
		waitForApprovalReady(t, ns, fmt.Sprintf("pay-%d", i), v1alpha1.ReasonApprovalPending)
		waitForEvent(t, ns, fmt.Sprintf("pay-%d", i), "Normal", v1alpha1.ReasonApprovalRequested)
	}
	patchApprovalStatus(t, ns, "pay-0", `{"decision":"Denied","decidedBy":"bob"}`)
	waitForApprovalReady(t, ns, "pay-0", v1alpha1.ReasonDenied)
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("%d requests and a decision took %s with the receiver hanging", n, took)
	}
	// At most two workers hold a notice each and one waits in the queue:
	// the rest were dropped, never waited for.
	if d := controllers.NoticesCount("dropped") - dropped; d < n-3 {
		t.Errorf("%v notices dropped, want at least %d", d, n-3)
	}
	testenv.Eventually(t, "a notice at the hanging receiver", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return arrived >= 1 && arrived <= 2, fmt.Sprintf("%d arrived (want 1 or 2: one per worker)", arrived)
	})
	stopped := time.Now()
	mgr.stop()
	if took := time.Since(stopped); took > 10*time.Second {
		t.Errorf("the manager took %s to stop with notices in flight", took)
	}
}
