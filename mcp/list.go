package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/engine/argfree"
)

// maxListBytes bounds a tools/list answer the proxy reads to filter: a
// larger one is refused rather than forwarded unfiltered.
const maxListBytes = 16 << 20

// mcpStatic is what a tools/list is filtered with: the bundle's deny
// rules that read nothing a call's arguments could change
// (argfree.Denials), compiled; nil compiled hides nothing.
type mcpStatic struct {
	compiled *engine.Compiled
	// key identifies the rules, so a new bundle with the same static
	// rules does not tell clients their lists changed.
	key string
}

// staticFields are the request fields a tools/list can fill without a
// call's arguments; agent_id, roles and environment only when this sidecar
// binds them (otherwise each call names its own).
func (p *Proxy) staticFields() []string {
	return append([]string{engine.FieldToolName, engine.FieldServer, engine.FieldAction, engine.FieldFramework}, p.d.Bind(nil)...)
}

// BundleLoaded recomputes the static rules for a new bundle and, when
// they changed, tells every open list stream.
func (p *Proxy) BundleLoaded(b engine.Bundle) {
	static := argfree.Denials(b, p.staticFields())
	next := &mcpStatic{}
	if len(static.Policies) > 0 {
		doc, _, err := engine.Encode(static)
		if err != nil {
			p.log.Error("tools/list filtering is off for this bundle: encoding its static rules failed", "err", err)
		} else {
			next.key = string(doc)
			next.compiled, _ = engine.Compile(static)
		}
	}
	prev := p.static.Swap(next)
	pinsChanged := p.loadPins(&b)
	if thawedOrFrozen := p.freezeChanged(); prev != nil && (prev.key != next.key || thawedOrFrozen || pinsChanged) {
		p.streams.notifyListChanged()
	}
}

// hidden tells whether a tool is denied by rule to this agent on rt
// whatever its arguments (a frozen agent's tools are all hidden:
// filterMessage asks agentFrozen once per list).
func (p *Proxy) hidden(st *mcpStatic, rt *mcpRoute, tool string) bool {
	if st == nil || st.compiled == nil {
		return false
	}
	req := engine.Request{engine.FieldToolName: tool, engine.FieldServer: rt.up.name, engine.FieldAction: "call", engine.FieldFramework: mcpFramework}
	return p.d.DeniedByRule(st.compiled, req)
}

// agentFrozen tells whether the served bundle (with the freezes watched
// through the API) freezes this sidecar's bound agent: the engine's own
// freeze check, which comes before any rule and reads neither the tool nor
// the upstream, so it holds for every call the agent could make.
func (p *Proxy) agentFrozen() bool {
	return p.d.Frozen(engine.Request{engine.FieldAction: "call", engine.FieldFramework: mcpFramework})
}

// freezeChanged records whether the bound agent is frozen now and tells
// whether that changed since lists were last told.
func (p *Proxy) freezeChanged() bool {
	frozen := p.agentFrozen()
	p.armFreezeExpiry()
	return p.wasFrozen.Swap(frozen) != frozen
}

// freezeExpirySlack is how long after a freeze's expiry the lists are
// looked at again: past it, whatever clock the timer and the engine read.
const freezeExpirySlack = 10 * time.Millisecond

// armFreezeExpiry sets one timer at the soonest expiry of any freeze
// served, so that open list streams are told when a freeze ends by
// itself: nothing else happens then (no bundle, no watch event), yet the
// frozen agent's tools come back. Any freeze's expiry is looked at, not
// only this agent's: the look is cheap, and tells only on a change.
func (p *Proxy) armFreezeExpiry() {
	now := time.Now
	if p.d.Config().Now != nil {
		now = p.d.Config().Now
	}
	var at time.Time
	due := false
	if c := p.d.State().Compiled; c != nil {
		at, due = c.NextFreezeExpiry(now())
	}
	p.expiryMu.Lock()
	defer p.expiryMu.Unlock()
	if p.expiry != nil {
		if due && at.Equal(p.expiryAt) {
			return // already set for it
		}
		p.expiry.Stop()
		p.expiry = nil
	}
	if !due {
		return
	}
	p.expiryAt = at
	var t *time.Timer
	t = time.AfterFunc(at.Sub(now())+freezeExpirySlack, func() {
		p.expiryMu.Lock()
		if p.expiry == t {
			p.expiry = nil // fired: the next look sets the next one
		}
		p.expiryMu.Unlock()
		p.FreezesChanged()
	})
	p.expiry = t
}

// FreezesChanged tells open list streams when the bound agent was
// frozen or thawed by a FrozenAgent watched through the API.
func (p *Proxy) FreezesChanged() {
	if p.freezeChanged() {
		p.streams.notifyListChanged()
	}
}

// filterList rewrites the answers to the POST's tools/list requests
// (ids): a JSON body whole, an event stream event by event as it passes.
func (p *Proxy) filterList(rt *mcpRoute, resp *http.Response, ids []json.RawMessage) error {
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	st := p.static.Load()
	return rewriteListAnswer(resp, func(msg []byte) []byte { return p.filterAnswers(st, rt, ids, msg) })
}

// rewriteListAnswer passes each message of a tools/list answer through
// rewrite: a JSON body whole (read at once, at most maxListBytes), an event
// stream event by event as resp.Body is read. Any other body is left as it
// is. The proxy's relay filters with it, its own listing learns.
func rewriteListAnswer(resp *http.Response, rewrite func([]byte) []byte) error {
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBytes+1))
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		if len(body) > maxListBytes {
			return fmt.Errorf("the tools/list answer is more than %d bytes", maxListBytes)
		}
		out := rewrite(body)
		resp.Body = io.NopCloser(bytes.NewReader(out))
		resp.ContentLength = int64(len(out))
		resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	case "text/event-stream":
		resp.Body = newSSERewriter(resp.Body, rewrite, nil)
	}
	return nil
}

// filterAnswers filters msg, one message or a batch of them: each answer
// to one of ids (any answer when ids is nil) holding a tools list.
func (p *Proxy) filterAnswers(st *mcpStatic, rt *mcpRoute, ids []json.RawMessage, msg []byte) []byte {
	trimmed := bytes.TrimSpace(msg)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return p.filterMessage(st, rt, ids, msg)
	}
	var batch []json.RawMessage
	if json.Unmarshal(trimmed, &batch) != nil {
		return msg
	}
	changed := false
	for i, m := range batch {
		if out := p.filterMessage(st, rt, ids, m); !bytes.Equal(out, m) {
			batch[i], changed = out, true
		}
	}
	if !changed {
		return msg
	}
	out, err := json.Marshal(batch)
	if err != nil {
		return msg
	}
	return out
}

// filterMessage removes hidden tools from msg when it answers one of ids
// (any id when ids is nil) with a tools list; anything else comes back
// unchanged.
func (p *Proxy) filterMessage(st *mcpStatic, rt *mcpRoute, ids []json.RawMessage, msg []byte) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil || top["result"] == nil || top["method"] != nil {
		return msg
	}
	if ids != nil && !slices.ContainsFunc(ids, func(id json.RawMessage) bool {
		return bytes.Equal(bytes.TrimSpace(top["id"]), bytes.TrimSpace(id))
	}) {
		return msg
	}
	frozen := p.agentFrozen()
	out, _ := keepTools(msg, top, func(t json.RawMessage) bool {
		rt.params.learn(t)
		if rt.pins.observe(t) || frozen {
			return false
		}
		var named struct {
			Name string `json:"name"`
		}
		return json.Unmarshal(t, &named) != nil || !p.hidden(st, rt, named.Name)
	})
	return out
}

func mediaType(ct string) string {
	t, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// sseRewriter passes an event stream through event by event (never
// holding more than the event being read), rewriting each event's data
// with rewrite, and writing whatever inject delivers between two events.
type sseRewriter struct {
	src     io.ReadCloser
	out     chan []byte
	pending []byte
	done    chan struct{}
	once    sync.Once
	// limit, when over is set, is the most of one event held: past it the
	// event so far goes to over (result_proxy.go), which says what to send
	// instead, or to pass it (and the rest of the event as it is read).
	limit int
	over  func(head []byte) (out []byte, pass bool)
}

// maxSSEEvent bounds one event the rewriter holds.
const maxSSEEvent = 16 << 20

func newSSERewriter(src io.ReadCloser, rewrite func([]byte) []byte, inject <-chan []byte) *sseRewriter {
	return startSSERewriter(&sseRewriter{src: src}, rewrite, inject)
}

func startSSERewriter(r *sseRewriter, rewrite func([]byte) []byte, inject <-chan []byte) *sseRewriter {
	r.out, r.done = make(chan []byte), make(chan struct{})
	events := make(chan []byte)
	go r.pump(rewrite, events)
	go func() {
		defer close(r.out)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return
				}
				select {
				case r.out <- ev:
				case <-r.done:
					return
				}
			case ev := <-inject:
				select {
				case r.out <- ev:
				case <-r.done:
					return
				}
			case <-r.done:
				return
			}
		}
	}()
	return r
}

// pump reads whole events (up to a blank line) and hands them on.
func (r *sseRewriter) pump(rewrite func([]byte) []byte, events chan<- []byte) {
	defer close(events)
	br := bufio.NewReaderSize(r.src, 32<<10)
	var ev []byte
	send := func() bool {
		if len(ev) == 0 {
			return true
		}
		out := ev
		if rewrite != nil {
			out = rewriteEvent(ev, rewrite)
		}
		ev = nil
		select {
		case events <- out:
			return true
		case <-r.done:
			return false
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		if r.over != nil && len(ev)+len(line) > r.limit {
			ev = append(ev, line...)
			whole := err == nil && len(bytes.TrimRight(line, "\r\n")) == 0 // its blank line read
			if !r.overflow(br, ev, err == bufio.ErrBufferFull, whole, events) || (err != nil && err != bufio.ErrBufferFull) {
				return
			}
			ev = nil
			continue
		}
		if err == bufio.ErrBufferFull {
			// A long data line: keep reading it.
			ev = append(ev, line...)
			if len(ev) > maxSSEEvent {
				return
			}
			continue
		}
		ev = append(ev, line...)
		if len(ev) > maxSSEEvent {
			return
		}
		if err != nil {
			send()
			return
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			if !send() {
				return
			}
		}
	}
}

// overflow sends what over makes of an event past the limit (head, read
// so far; partial: its last line is not whole), then passes the rest of
// the event on as it is read, or drops it. It tells whether to go on.
func (r *sseRewriter) overflow(br *bufio.Reader, head []byte, partial, whole bool, events chan<- []byte) bool {
	out, pass := r.over(head)
	send := func(b []byte) bool {
		select {
		case events <- b:
			return true
		case <-r.done:
			return false
		}
	}
	if !send(out) {
		return false
	}
	for !whole {
		line, err := br.ReadSlice('\n')
		blank := !partial && err == nil && len(bytes.TrimRight(line, "\r\n")) == 0
		if pass && len(line) > 0 && !send(append([]byte(nil), line...)) {
			return false
		}
		if err != nil && err != bufio.ErrBufferFull {
			return false // the stream ended inside the event
		}
		if blank {
			return true
		}
		partial = err == bufio.ErrBufferFull
	}
	return true
}

// rewriteEvent applies rewrite to an event's data (its data lines joined),
// keeping its other fields.
func rewriteEvent(ev []byte, rewrite func([]byte) []byte) []byte {
	var data [][]byte
	var other []byte
	for _, line := range bytes.SplitAfter(ev, []byte{'\n'}) {
		trimmed := bytes.TrimRight(line, "\r\n")
		if d, ok := bytes.CutPrefix(trimmed, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(d, []byte{' '}))
			continue
		}
		if len(trimmed) > 0 {
			other = append(other, line...)
		}
	}
	if data == nil {
		return ev
	}
	joined := bytes.Join(data, []byte{'\n'})
	out := rewrite(joined)
	if bytes.Equal(out, joined) {
		return ev
	}
	res := append([]byte(nil), other...)
	res = append(res, "data: "...)
	res = append(res, out...)
	return append(res, "\n\n"...)
}

func (r *sseRewriter) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		ev, ok := <-r.out
		if !ok {
			return 0, io.EOF
		}
		r.pending = ev
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

func (r *sseRewriter) Close() error {
	r.once.Do(func() { close(r.done) })
	return r.src.Close()
}

// listStreams are the open streams a notifications/tools/list_changed can
// be sent on: 2025-11-25 sessions' GET streams, 2026-07-28
// subscriptions/listen streams that asked for tool list changes.
type listStreams struct {
	mu      sync.Mutex
	streams map[chan []byte][]byte // channel -> the notification it gets
	// bySession are the 2025-11-25 sessions' GET streams, by
	// Mcp-Session-Id: where a held call's progress goes (hold.go).
	bySession map[string]chan []byte
}

// addSession makes ch the stream of session's own notifications.
func (ls *listStreams) addSession(session string, ch chan []byte) {
	if session == "" {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.bySession == nil {
		ls.bySession = map[string]chan []byte{}
	}
	ls.bySession[session] = ch
}

// notifySession queues ev on session's GET stream, if it has one and
// nothing is queued there already (a progress notification may be
// dropped: the next one says more).
func (ls *listStreams) notifySession(session string, ev []byte) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ch, ok := ls.bySession[session]; ok {
		select {
		case ch <- ev:
		default:
		}
	}
}

func (ls *listStreams) add(note []byte) chan []byte {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.streams == nil {
		ls.streams = map[chan []byte][]byte{}
	}
	ch := make(chan []byte, 1)
	ls.streams[ch] = note
	return ch
}

func (ls *listStreams) remove(ch chan []byte) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.streams, ch)
	for s, c := range ls.bySession {
		if c == ch {
			delete(ls.bySession, s)
		}
	}
}

// notifyListChanged queues one notification per stream; one already
// queued and not yet sent says the same.
func (ls *listStreams) notifyListChanged() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for ch, note := range ls.streams {
		select {
		case ch <- note:
		default:
		}
	}
}

// listChangedEvent is the SSE event the proxy adds: for a
// subscriptions/listen stream (listenID set) it names the subscription.
func listChangedEvent(listenID json.RawMessage) []byte {
	out := []byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"`)
	if len(listenID) > 0 {
		out = append(out, `,"params":{"_meta":{"io.modelcontextprotocol/subscriptionId":`...)
		out = append(out, listenID...)
		out = append(out, "}}"...)
	}
	return append(out, "}\n\n"...)
}

// watchListStream makes a session stream carry list_changed notifications
// when the bundle changes what is hidden, and filters any tools list
// answered on it.
func (p *Proxy) watchListStream(resp *http.Response, rt *mcpRoute, listenID json.RawMessage) {
	note := listChangedEvent(listenID)
	ch := p.streams.add(note)
	if listenID == nil {
		p.streams.addSession(resp.Request.Header.Get("Mcp-Session-Id"), ch)
	}
	rw := newSSERewriter(resp.Body, func(msg []byte) []byte { return p.filterAnswers(p.static.Load(), rt, nil, msg) }, ch)
	resp.Body = &closeHook{ReadCloser: rw, onClose: func() { p.streams.remove(ch) }}
}

type closeHook struct {
	io.ReadCloser
	onClose func()
	once    sync.Once
}

func (c *closeHook) Close() error {
	c.once.Do(c.onClose)
	return c.ReadCloser.Close()
}
