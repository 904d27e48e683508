package e2e

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// connTracker dials TCP and remembers the connections, to drop them all
// as a client that goes away does.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (c *connTracker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

func (c *connTracker) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// TestHeldCallSurvivesReconnectAndCancel (issue 27): a client that
// cancels its held call (the SDK sends notifications/cancelled) or goes
// away leaves its ApprovalRequest pending, and nothing reaches the
// upstream; the same call sent again from a new connection waits on that
// same request, and once approved reaches the upstream exactly once.
func TestHeldCallSurvivesReconnectAndCancel(t *testing.T) {
	r := startApprovalRig(t)
	seen := map[string]bool{}
	conns := &connTracker{}
	first := r.connectVia(&http.Client{Transport: &http.Transport{DialContext: conns.dial}})
	before := r.calls("pay")

	// Cancelled: the client gives up; the proxy stops holding the call.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := first.CallTool(ctx, &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{"amount": 9000}})
		gaveUp <- err
	}()
	ar := r.pending(seen)
	cancel()
	select {
	case err := <-gaveUp:
		if err == nil {
			t.Fatal("a cancelled call returned a result")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	// Gone: the client's connections drop while its call is held.
	gone := callAsync(first, "pay", map[string]any{"amount": 9000})
	time.Sleep(300 * time.Millisecond) // the call reaches the proxy and is held
	conns.closeAll()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the call whose connection dropped did not return")
	}

	// Again, from a new connection: the same request, not a new one.
	second := r.connect(nil)
	again := callAsync(second, "pay", map[string]any{"amount": 9000})
	stillHeld(t, again) // 500 ms: a second request would have been made by now
	if got := r.requests(); len(got) != 1 || got[0] != ar.Name {
		var list v1alpha1.ApprovalRequestList
		_ = r.cluster.Client.List(context.Background(), &list, client.InNamespace(r.ns))
		t.Fatalf("ApprovalRequests %v, want only %s: the same call waits on the same request; they are %+v", got, ar.Name, list.Items)
	}
	r.waitForGuards(ar.Name)
	if code, out := r.toolgateAs(r.kubeconfigAs("alice", "system:authenticated"), "approve", ar.Name); code != 0 {
		t.Fatalf("approve: exit %d: %s", code, out)
	}
	if res := outcome(t, again, 20*time.Second); res.IsError {
		t.Fatalf("the approved call was refused: %s", text(res))
	}
	time.Sleep(300 * time.Millisecond) // a cancelled or abandoned call released now would reach the upstream
	if got := r.calls("pay"); got != before+1 {
		t.Fatalf("the upstream saw %d pay calls, want exactly one more than %d: the cancelled and abandoned calls never reach it", got, before)
	}
}
