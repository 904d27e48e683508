package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestStdioGuardHoldsForApproval (issue 27): `toolgate mcp stdio` in front
// of a real stdio MCP server (test/mcpserver -stdio, the official Go SDK),
// asked by the official SDK client, deciding through the real sidecar:
// an asked call is held without stopping the guard (another call passes
// meanwhile), the client that sent a progressToken is told it waits, and
// the call reaches the server once the admin approves.
func TestStdioGuardHoldsForApproval(t *testing.T) {
	r := startApprovalRig(t)
	server, err := mcptest.ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	stats := testenv.FreeLoopbackAddr(t)
	cmd := exec.Command(r.bin, "mcp", "stdio", "--server", "pay", "--url", "http://"+r.addr, "--", server, "-stdio", "-listen", stats)
	cmd.Stderr = os.Stderr
	progress := make(chan string, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "approvals-stdio", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params.Message
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("starting the server through toolgate mcp stdio: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	calls := func() int {
		resp, err := http.Get("http://" + stats + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var st struct {
			Calls map[string]int `json:"calls"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.Calls["pay"]
	}

	held := make(chan callOutcome, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{"amount": 8000}}
		params.SetProgressToken("wait-1")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, params)
		held <- callOutcome{res, err}
	}()
	ar := r.pending(map[string]bool{})
	if ar.Spec.Tool != "pay" || !strings.Contains(ar.Spec.Preview, "8000") {
		t.Fatalf("ApprovalRequest %+v", ar.Spec)
	}
	// The guard reads on: a small payment passes while the big one waits.
	if res := outcome(t, callAsync(cs, "pay", map[string]any{"amount": 5}), 10*time.Second); res.IsError {
		t.Fatalf("a payment of 5 was refused while another waited: %s", text(res))
	}
	if got := calls(); got != 1 {
		t.Fatalf("the server saw %d pay calls, want only the small one", got)
	}
	select {
	case msg := <-progress:
		if !strings.Contains(msg, "approve") {
			t.Errorf("progress message %q", msg)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no progress notification while the call waited")
	}
	stillHeld(t, held)
	r.waitForGuards(ar.Name)
	if code, out := r.toolgateAs(r.kubeconfigAs("alice", "system:authenticated"), "approve", ar.Name); code != 0 {
		t.Fatalf("approve: exit %d: %s", code, out)
	}
	if res := outcome(t, held, 20*time.Second); res.IsError {
		t.Fatalf("the approved call was refused: %s", text(res))
	}
	if got := calls(); got != 2 {
		t.Fatalf("the server saw %d pay calls, want 2: the approved one once", got)
	}
}
