package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/mcp/callresult"
)

// The HTTP proxy's side of judging results. A POST's allowed tools/call
// requests are kept (pendingResult) only when the bundle served has result
// rules; the answer to the POST is then read (a JSON body whole, at most
// --max-result-bytes; an event stream event by event, each event at most
// that) and every result answering a kept call is judged before it goes
// on. Without result rules nothing is kept, and the answer is relayed as
// before: not buffered, not parsed.

// pendingResult is an allowed tools/call whose result is to be judged:
// its id and the request its call was decided with (the arguments
// decoded once, for the call).
type pendingResult struct {
	id   json.RawMessage
	req  engine.Request
	tool string
}

// resultJudge judges the answers to one POST's calls.
type resultJudge struct {
	p      *Proxy
	ctx    context.Context
	header http.Header
	modern bool
	limit  int
	mu     sync.Mutex
	calls  []*pendingResult
	// later are the decisions to record once the answer has been relayed
	// (recordLater): as for an allowed call (mcpInfo.allowed), waking the
	// log's writer is kept off the way to the client.
	later []*decisionlog.Event
}

// recordLater records the decisions kept for after the answer, once.
func (j *resultJudge) recordLater() {
	j.mu.Lock()
	later := j.later
	j.later = nil
	j.mu.Unlock()
	for _, ev := range later {
		j.p.d.Record(ev)
	}
}

// take removes and returns the pending call id answers, nil when none
// waits on it.
func (j *resultJudge) take(id json.RawMessage) *pendingResult {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, c := range j.calls {
		if sameID(c.id, id) {
			j.calls = append(j.calls[:i:i], j.calls[i+1:]...)
			return c
		}
	}
	return nil
}

// judgeResults rewrites the answer to a POST with calls to judge: a JSON
// body, or the event stream of its answers (other messages, tools/list
// answers filtered as filterList does, pass through it).
func (p *Proxy) judgeResults(rt *mcpRoute, resp *http.Response, info *mcpInfo) error {
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	j := &resultJudge{p: p, ctx: resp.Request.Context(), header: resp.Request.Header, modern: modernMCP(resp.Request),
		limit: p.maxResultBytes(), calls: info.results}
	rewrite := j.answers
	if info.listIDs != nil {
		st := p.static.Load()
		rewrite = func(msg []byte) []byte { return p.filterAnswers(st, rt, info.listIDs, j.answers(msg)) }
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		if err := j.body(resp, rewrite); err != nil {
			return err
		}
	case "text/event-stream":
		// Events are rewritten as they pass: the stream's length is not
		// known ahead (an upstream that sent one is not held to it).
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
		resp.Body = startSSERewriter(&sseRewriter{src: resp.Body, limit: j.limit, over: j.overEvent}, rewrite, nil)
	default:
		return nil
	}
	resp.Body = &closeHook{ReadCloser: resp.Body, onClose: j.recordLater}
	return nil
}

func (p *Proxy) maxResultBytes() int {
	if p.maxResult > 0 {
		return p.maxResult
	}
	return DefaultMaxResultBytes
}

// body judges a JSON body: read whole when it is at most the limit; past
// it, judged on what was held, and withheld or passed on whole.
func (j *resultJudge) body(resp *http.Response, rewrite func([]byte) []byte) error {
	head, err := io.ReadAll(io.LimitReader(resp.Body, int64(j.limit)+1))
	if err != nil {
		_ = resp.Body.Close()
		return err
	}
	var out []byte
	if len(head) <= j.limit {
		_ = resp.Body.Close()
		out = rewrite(head)
	} else {
		replacement, pass := j.over(head[:j.limit], int(resp.ContentLength))
		if pass {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
			return nil
		}
		_ = resp.Body.Close()
		out = replacement
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return nil
}

// answers judges msg, one message or a batch.
func (j *resultJudge) answers(msg []byte) []byte { return eachMessage(msg, j.message) }

// message judges one message when it answers a pending call.
func (j *resultJudge) message(msg []byte) []byte {
	a, ok := readAnswer(msg)
	if !ok {
		return msg
	}
	call := j.take(a.id)
	if call == nil {
		return msg
	}
	if out := j.judge(call, &a); out != nil {
		return out
	}
	return msg
}

// judge decides call's result (decide.DecideResult) and records the
// decision; nil when the answer goes on unchanged. A result that cannot be
// read, or a decision that fails, withholds it.
func (j *resultJudge) judge(call *pendingResult, a *answer) (out []byte) {
	d := j.p.d
	ev := j.event(call)
	req := maps.Clone(call.req)
	defer func() {
		if v := recover(); v != nil {
			res := d.Failed(v)
			out = j.withhold(call, &ev, req, res)
		}
	}()
	cr, err := callresult.Parse(a.result)
	if err == nil {
		err = req.DecodeField(engine.FieldOutput, cr.OutputDoc(), d.Config().MaxRequestElements)
	}
	if err != nil {
		return j.withhold(call, &ev, req, decide.SelfDeny(CodeResultUnreadable, err.Error()+"; withheld"))
	}
	res, st := d.DecideResult(req, false, &ev)
	ev.ID = d.NextID()
	var decision []byte
	if res.Decision == engine.Deny {
		decision = d.AppendAnswer(nil, &res, st, ev.ID)
	}
	if d.Settle(j.ctx, &ev, req, &res, st.Revision) {
		j.mu.Lock()
		j.later = append(j.later, &ev)
		j.mu.Unlock()
	}
	return delivered(a, cr, &res, decision, j.modern)
}

func (j *resultJudge) event(call *pendingResult) decisionlog.Event {
	ev := decisionlog.Event{At: time.Now(), Framework: mcpFramework, ToolName: call.tool}
	ev.TraceID, ev.SpanID = decisionlog.TraceOf(j.header)
	return ev
}

// overEvent judges an event past the limit (head: the event so far).
func (j *resultJudge) overEvent(head []byte) ([]byte, bool) {
	out, pass := j.over(eventData(head), -1)
	if pass {
		return head, true
	}
	return append(append([]byte("event: message\ndata: "), out...), "\n\n"...), false
}

// over judges an answer larger than the limit on what was held (head):
// output.text is head, and every condition on the text or structured
// content holds (engine.EvalOptions.OutputTruncated). Denied or redacted,
// the answer is withheld: each call still pending gets an isError result
// saying the result was larger than the limit (only the call it answers
// when its id comes first, as the SDKs write it). Otherwise it passes
// whole.
// size is the answer's length when known, -1 otherwise.
func (j *resultJudge) over(head []byte, size int) ([]byte, bool) {
	j.mu.Lock()
	calls := j.calls
	j.mu.Unlock()
	if id := headID(head); id != nil {
		// It says which call it answers: only that one is judged.
		calls = slices.DeleteFunc(slices.Clone(calls), func(c *pendingResult) bool { return !sameID(c.id, id) })
	}
	if len(calls) == 0 {
		return nil, true // it answers nothing judged
	}
	if size < 0 {
		size = len(head)
	}
	d := j.p.d
	var answers [][]byte
	pass := true
	for _, call := range calls {
		ev := j.event(call)
		req := maps.Clone(call.req)
		doc := callresult.AppendOutputDoc(nil, heldText(head), nil, false, size)
		if err := req.DecodeField(engine.FieldOutput, doc, d.Config().MaxRequestElements); err != nil {
			answers = append(answers, j.withhold(call, &ev, req, decide.SelfDeny(CodeResultUnreadable, err.Error()+"; withheld")))
			pass = false
			continue
		}
		res, st := d.DecideResultTruncated(req, false, &ev)
		ev.ID = d.NextID()
		d.Commit(j.ctx, &ev, req, &res, st.Revision)
		if res.Decision == engine.Deny || res.Effect == engine.EffectRedact {
			pass = false
			answers = append(answers, withheld(call.id, CodeResultTooLarge, tooLargeReason(j.limit, &res), j.modern))
		}
	}
	if pass {
		return nil, true
	}
	for _, c := range calls {
		j.take(c.id)
	}
	if len(answers) == 1 {
		return answers[0], false
	}
	return append(append([]byte{'['}, bytes.Join(answers, []byte{','})...), ']'), false
}

// withhold records a deny the proxy made itself about call's result and
// returns the answer that withholds it.
func (j *resultJudge) withhold(call *pendingResult, ev *decisionlog.Event, req engine.Request, res engine.Result) []byte {
	d := j.p.d
	st := d.State()
	ev.ID = d.NextID()
	ev.Phase = engine.PhaseResult
	d.Commit(j.ctx, ev, req, &res, st.Revision)
	return denyCallResult(call.id, &res, d.AppendAnswer(nil, &res, st, ev.ID), j.modern)
}

// eventData is an event's data lines joined, as far as they were read.
func eventData(ev []byte) []byte {
	var data [][]byte
	for _, line := range bytes.SplitAfter(ev, []byte{'\n'}) {
		if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(d, []byte{' '}))
		}
	}
	return bytes.Join(data, []byte{'\n'})
}

// withholdReplayed makes a session's GET stream withhold every tools/call
// result on it: a 2025-11-25 client that resumes a POST's stream there
// (Last-Event-ID) is replayed answers whose calls this stream does not
// know, so they cannot be judged, and a result the rules could not read
// is not one they passed. Only while the bundle has result rules.
func (p *Proxy) withholdReplayed(resp *http.Response) {
	modern := modernMCP(resp.Request)
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	resp.Body = newSSERewriter(resp.Body, func(msg []byte) []byte {
		if !p.d.State().Compiled.HasResultRules() {
			return msg
		}
		return eachMessage(msg, func(m []byte) []byte {
			a, ok := readAnswer(m)
			if !ok || !isCallResult(a.result) {
				return m
			}
			return withheld(a.id, CodeResultUnjudged, "a tools/call result replayed on the session's stream, apart from its call, cannot be judged; withheld", modern)
		})
	}, nil)
}

// isCallResult tells a CallToolResult from other results by its content
// array (resources/read has contents, prompts/get messages).
func isCallResult(result json.RawMessage) bool {
	var r struct {
		Content json.RawMessage `json:"content"`
	}
	return json.Unmarshal(result, &r) == nil && len(bytes.TrimSpace(r.Content)) > 0 && bytes.TrimSpace(r.Content)[0] == '['
}
