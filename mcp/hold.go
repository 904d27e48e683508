package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// MethodCancelled is the notification a client sends to cancel a request
// it made: a call held for approval stops waiting (and is answered deny
// APPROVAL_TIMEOUT, its ApprovalRequest left as it is).
const MethodCancelled = "notifications/cancelled"

// heldCalls are the calls held for approval, by session and request id,
// so that the client's notifications/cancelled reaches them.
type heldCalls struct {
	mu    sync.Mutex
	calls map[string]context.CancelFunc
}

func heldKey(session string, id json.RawMessage) string { return session + "\x00" + string(id) }

func (h *heldCalls) add(key string, cancel context.CancelFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string]context.CancelFunc{}
	}
	h.calls[key] = cancel
}

func (h *heldCalls) remove(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.calls, key)
}

// cancel stops the wait of the call key names, if it is held.
func (h *heldCalls) cancel(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.calls[key]
	if ok {
		c()
		delete(h.calls, key)
	}
	return ok
}

// cancelHeld reads a notifications/cancelled and stops the held call it
// names. The notification is forwarded all the same: the upstream may
// hold other requests of the client.
func (p *Proxy) cancelHeld(r *http.Request, m *jsonrpc.Message) {
	if id := cancelledID(m); id != nil {
		p.held.cancel(heldKey(r.Header.Get("Mcp-Session-Id"), id))
	}
}

// cancelledID is the request a notifications/cancelled names, nil when
// its params name none.
func cancelledID(m *jsonrpc.Message) json.RawMessage {
	var params struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &params) != nil || len(params.RequestID) == 0 {
		return nil
	}
	return params.RequestID
}

// hold holds a call an ask rule decided until a person decides it, its
// request expires, the client cancels it or goes away, or the state
// served stops asking for it (a freeze denies at once): the upstream sees
// nothing of it meanwhile. A client that reconnects and sends the same
// call again waits on the same ApprovalRequest (an identical call reuses
// it). While it waits the call gives back its --max-evaluations slot.
func (p *Proxy) hold(r *http.Request, m *jsonrpc.Message, req engine.Request, ev *decisionlog.Event, res engine.Result, st *decide.State) (engine.Result, *decide.State) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if len(m.ID) > 0 {
		key := heldKey(r.Header.Get("Mcp-Session-Id"), m.ID)
		p.held.add(key, cancel)
		defer p.held.remove(key)
	}
	p.d.Done()
	defer p.d.Reenter()
	o := decide.AskOptions{Wait: res.ApprovalTimeout}
	// A client that asked for progress hears, on its session's GET stream
	// (2025-11-25), that the call waits for a person: the POST itself says
	// nothing until the call is decided.
	if session, token := r.Header.Get("Mcp-Session-Id"), progressToken(m); session != "" && token != nil {
		o.ProgressEvery = progressEvery
		o.Progress = func(waited time.Duration) {
			p.streams.notifySession(session, progressEvent(token, waited))
		}
	}
	res, st, ev.Waited = p.d.Resolve(ctx, req, res, st, o)
	return res, st
}

// progressEvent is a notifications/progress as an SSE event.
func progressEvent(token json.RawMessage, waited time.Duration) []byte {
	out := []byte("event: message\ndata: ")
	out = appendProgress(out, token, waited)
	return append(out, "\n\n"...)
}

// approvalText is what an answer settled by an approval says to the model.
func approvalText(res *engine.Result) (string, bool) {
	if !strings.HasPrefix(string(res.Code), "APPROVAL_") {
		return "", false
	}
	return string(res.Code) + ": " + res.Reason, true
}
