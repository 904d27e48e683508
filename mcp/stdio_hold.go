package mcp

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// Waiter decides a call again against the ApprovalRequest approval names,
// holding the answer up to wait for a person's decision (the sidecar's
// /v1/evaluate with "approval" and "wait"): allow once approved, a deny
// otherwise. It never fails: a decision it could not get is a deny.
type Waiter func(ctx context.Context, request []byte, approval string, wait time.Duration) (res engine.Result, decision []byte)

// progressEvery is how often a held call's client is told it still waits,
// when it asked for progress (a progressToken in the call's _meta).
const progressEvery = 5 * time.Second

// lockedWriter serialises whole writes to the server: the guard's loop
// and the held calls, released later, write to it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// holdAsked holds a tools/call an ask rule decided without stopping the
// guard: the agent's other messages (its notifications/cancelled, other
// calls) are read and relayed meanwhile. Once a person approves, the
// call's own line goes to the server; denied, expired or cancelled, the
// agent gets the deny. It reports whether it took the call.
func (g *stdioGuard) holdAsked(ctx context.Context, m *jsonrpc.Message, line, doc []byte, res *engine.Result) bool {
	if g.opts.Wait == nil || res.Decision != engine.Ask || res.Approval == nil || len(m.ID) == 0 || m.Method != jsonrpc.MethodToolsCall {
		return false
	}
	ctx, cancel := context.WithCancel(ctx)
	key := heldKey("", m.ID) // over stdio the agent is the one session
	g.held.add(key, cancel)
	line = append([]byte(nil), line...)
	id := append(json.RawMessage(nil), m.ID...)
	method := m.Method
	token := progressToken(m)
	approval, expires := res.Approval.Name, res.Approval.ExpiresAt
	go func() {
		defer func() {
			cancel()
			g.held.remove(key)
		}()
		if token != nil {
			go g.progress(ctx, token)
		}
		final, decision := g.opts.Wait(ctx, doc, approval, time.Until(expires))
		if final.Decision == engine.Allow {
			if g.judging() {
				g.expect(id, doc)
			}
			_, _ = g.toServer.Write(line)
			return
		}
		if len(decision) == 0 {
			decision, _ = final.AppendJSON(nil)
		}
		_ = g.out.line(denyAnswer(id, method, &final, decision, g.modern))
	}()
	return true
}

// cancelHeld stops the held call a notifications/cancelled names.
func (g *stdioGuard) cancelHeld(m *jsonrpc.Message) {
	if id := cancelledID(m); id != nil {
		g.held.cancel(heldKey("", id))
	}
}

// appendProgress appends a notifications/progress for token: the seconds
// a held call has waited so far.
func appendProgress(dst []byte, token json.RawMessage, waited time.Duration) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
	dst = append(dst, token...)
	dst = append(dst, `,"progress":`...)
	dst = strconv.AppendInt(dst, int64(waited.Seconds()), 10)
	return append(dst, `,"message":"waiting for a person to approve this call"}}`...)
}

// progressToken is the progressToken of a call's _meta, nil without one.
func progressToken(m *jsonrpc.Message) json.RawMessage {
	if m.Call == nil || len(m.Call.RawMeta) == 0 {
		return nil
	}
	var meta struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(m.Call.RawMeta, &meta) != nil || len(meta.ProgressToken) == 0 || string(meta.ProgressToken) == "null" {
		return nil
	}
	return meta.ProgressToken
}

// progress tells the agent, every progressEvery, that its call still
// waits for a person: notifications/progress with the seconds waited.
func (g *stdioGuard) progress(ctx context.Context, token json.RawMessage) {
	t := time.NewTimer(time.Second) // held, not merely slow; then every progressEvery
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = g.out.line(appendProgress(nil, token, time.Since(start)))
			t.Reset(progressEvery)
		}
	}
}
