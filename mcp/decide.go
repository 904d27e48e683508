package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/httploop"
	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// mcpFramework is the framework a proxied call is decided and logged as.
const mcpFramework = "mcp"

// MetaDecision is where a deny's decision object goes in the
// CallToolResult, for clients and tools that read more than the text.
const MetaDecision = "toolgate.dev/decision"

const RPCInvalidParams = -32602

// mcpInfo is what the proxy learnt of a POST, for the response side.
type mcpInfo struct {
	msgs  []jsonrpc.Message
	batch bool
	// listIDs are the ids of the tools/list requests in the POST, whose
	// answers are filtered.
	listIDs []json.RawMessage
	// listenID is the id of a subscriptions/listen request that asked for
	// tool list changes: its stream gets the proxy's too.
	listenID json.RawMessage
	// allowed are the allowed calls' decision log events, recorded once
	// the POST is on its way upstream: the log's writer, idle between
	// sparse calls, is woken by a record, and that wake-up (a thread's, tens
	// of µs on the measuring VM) was on every call's way to the upstream.
	allowed []*decisionlog.Event
	log     *decide.Decider
	// arrived is when the POST's first byte was read (MonoNow); held,
	// told once it is sent, times its way through the proxy.
	arrived int64
	held    prometheus.Observer
	// results are the allowed tools/call requests whose results are
	// judged (result_proxy.go); nil when the bundle has no result rules.
	results []*pendingResult
}

// sent is told that the POST is on its way upstream (written, or handed to
// the HTTP transport) or failed to be: it records the allowed calls and,
// for a POST sent, the time the proxy held it.
func (info *mcpInfo) sent(ok bool) {
	if ok && info.held != nil {
		info.held.Observe(float64(httploop.MonoNow()-info.arrived) / 1e9)
	}
	info.held = nil
	info.recordAllowed()
}

// recordAllowed records the allowed calls' events, once.
func (info *mcpInfo) recordAllowed() {
	for _, ev := range info.allowed {
		info.log.Record(ev)
	}
	info.allowed = nil
}

type mcpInfoKey struct{}

func withMCPInfo(ctx context.Context, info *mcpInfo) context.Context {
	return context.WithValue(ctx, mcpInfoKey{}, info)
}

func mcpInfoOf(ctx context.Context) *mcpInfo {
	info, _ := ctx.Value(mcpInfoKey{}).(*mcpInfo)
	return info
}

// decideCall decides one tools/call message, or another method decided
// (methods.go), through the sidecar's one decision path (evaluateRequest,
// then finish: decision log and metrics), as {tool_name, server, action,
// input, agent_id, session_id, framework: mcp}. Not allowed, it returns
// the JSON-RPC answer the client gets instead (nil for a notification,
// which gets none), and has logged it. Allowed, it returns the decision
// log event for the caller to record (nil when no log is kept). A call
// whose argument keys differ from its tool's schema only in case
// (argkeys.go) is not decided: refused says why, and the POST is
// answered 400.
// keep, when not nil, is given the request of an allowed call, whose
// result is judged with it.
func (p *Proxy) decideCall(r *http.Request, rt *mcpRoute, m *jsonrpc.Message, bodyBytes int, keep *engine.Request) (answer json.RawMessage, allowed bool, logLater *decisionlog.Event, refused string) {
	sub, refusal := subjectOf(m)
	return p.decideSubject(r, rt, m, sub, refusal, bodyBytes, keep)
}

// decideSubject decides what m asks (sub, or refusal: why it cannot be
// decided), as decideCall says.
func (p *Proxy) decideSubject(r *http.Request, rt *mcpRoute, m *jsonrpc.Message, sub subject, refusal string, bodyBytes int, keep *engine.Request) (answer json.RawMessage, allowed bool, logLater *decisionlog.Event, refused string) {
	d := p.d
	ev := decisionlog.Event{At: time.Now(), BodyBytes: bodyBytes, Framework: mcpFramework}
	ev.TraceID, ev.SpanID = decisionlog.TraceOf(r.Header)
	var req engine.Request
	recorded := false
	defer func() {
		if v := recover(); v != nil {
			res := d.Failed(v)
			if !recorded {
				answer, allowed, logLater, refused = p.selfDeny(r, m, &ev, req, res), false, nil, ""
			}
		}
	}()
	if refusal != "" {
		return refuseCall(m.ID, refusal), false, nil, ""
	}
	ev.ToolName = sub.tool
	// The same cap as /v1/evaluate: past it, deny at once, never queue.
	if !d.Admit() {
		recorded = true
		return p.selfDeny(r, m, &ev, nil, decide.SelfDeny(decide.CodeOverloaded, d.OverloadReason())), false, nil, ""
	}
	defer d.Done()
	session := r.Header.Get("Mcp-Session-Id")
	if session == "" && sub.meta.SessionID != nil {
		session = *sub.meta.SessionID
	}
	maxElements := d.Config().MaxRequestElements
	req, err := callRequest(sub.tool, rt.up.name, sub.action, sub.input, session, sub.meta.AgentID, maxElements)
	if err != nil {
		return refuseCall(m.ID, fmt.Sprintf("toolgate: the %s cannot be decided: %v (--max-request-elements is %d); not forwarded", m.Method, err, maxElements)), false, nil, ""
	}
	if m.Method == jsonrpc.MethodToolsCall {
		if err := rt.params.checkArgumentKeys(sub.tool, req[engine.FieldInput]); err != nil {
			recorded = true
			return nil, false, nil, "toolgate: " + err.Error() + "; not forwarded"
		}
		if res, denied := rt.pins.denyCall(sub.tool); denied {
			recorded = true
			return p.selfDeny(r, m, &ev, req, res), false, nil, ""
		}
	}
	res, st := d.Decide(req, false, &ev)
	if res.Decision == engine.Ask {
		res, st = p.hold(r, m, req, &ev, res, st)
	}
	ev.ID = d.NextID()
	if res.Decision != engine.Allow {
		answer = denyAnswer(m.ID, m.Method, &res, d.AppendAnswer(nil, &res, st, ev.ID), modernMCP(r))
	}
	recorded = true
	if res.Decision != engine.Allow {
		d.Commit(r.Context(), &ev, req, &res, st.Revision)
		return answer, false, nil, ""
	}
	if d.Settle(r.Context(), &ev, req, &res, st.Revision) {
		logLater = &ev
	}
	if keep != nil {
		*keep = req
	}
	return nil, true, logLater, ""
}

// callRequest is the engine request for a call (or another request
// decided: action says which), {tool_name, server, action, framework:
// mcp, input, session_id, agent_id}, built once:
// the arguments are decoded into it as /v1/evaluate decodes a body
// (engine.Request.DecodeField: numbers, the element limit and its error),
// and every field holds what mcpRequestDoc's JSON would decode to
// (FuzzCallRequestIsTheDocument holds the two equal).
func callRequest(tool, server, action string, args json.RawMessage, session string, agent *string, maxElements int) (engine.Request, error) {
	req := make(engine.Request, 7)
	req[engine.FieldToolName] = engine.DecodedString(tool)
	req[engine.FieldServer] = engine.DecodedString(server)
	req[engine.FieldAction] = boxedAction(action)
	req[engine.FieldFramework] = mcpFramework
	if session != "" {
		req[engine.FieldSessionID] = engine.DecodedString(session)
	}
	if agent != nil {
		req[engine.FieldAgentID] = engine.DecodedString(*agent)
	}
	if len(args) > 0 && string(args) != "null" {
		if err := req.DecodeField(engine.FieldInput, args, maxElements); err != nil {
			return nil, err
		}
	} else if err := req.CheckLimit(maxElements); err != nil {
		return nil, err
	}
	return req, nil
}

// mcpRequestDoc is the engine request for a call as a JSON document: what
// the stdio guard sends its decider (the sidecar's /v1/evaluate or the
// in-process evaluator), decoded there exactly as callRequest builds it.
func mcpRequestDoc(tool, server, action string, args json.RawMessage, session string, agent *string) []byte {
	doc := make([]byte, 0, 160+len(args))
	doc = append(doc, `{"tool_name":`...)
	doc = engine.AppendJSONString(doc, tool)
	doc = append(doc, `,"server":`...)
	doc = engine.AppendJSONString(doc, server)
	doc = append(doc, `,"action":`...)
	doc = engine.AppendJSONString(doc, action)
	doc = append(doc, `,"framework":"mcp"`...)
	if len(args) > 0 && string(args) != "null" {
		doc = append(doc, `,"input":`...)
		doc = append(doc, args...)
	}
	if session != "" {
		doc = append(doc, `,"session_id":`...)
		doc = engine.AppendJSONString(doc, session)
	}
	if agent != nil {
		doc = append(doc, `,"agent_id":`...)
		doc = engine.AppendJSONString(doc, *agent)
	}
	return append(doc, '}')
}

// selfDeny is a deny the sidecar made itself (overload, failure), logged
// and counted as a decision like /v1/evaluate's.
func (p *Proxy) selfDeny(r *http.Request, m *jsonrpc.Message, ev *decisionlog.Event, req engine.Request, res engine.Result) json.RawMessage {
	st := p.d.State()
	ev.ID = p.d.NextID()
	answer := denyAnswer(m.ID, m.Method, &res, p.d.AppendAnswer(nil, &res, st, ev.ID), modernMCP(r))
	p.d.Commit(r.Context(), ev, req, &res, st.Revision)
	return answer
}

// msgBadCallParams refuses a tools/call whose params are not an object
// with a string name (jsonrpc.Message.Call is nil): nothing to decide.
const msgBadCallParams = "toolgate: tools/call params must be an object with a string name; not forwarded"

// refuseCall answers a call that cannot be decided with a JSON-RPC error
// (nil for a notification, which gets none), over HTTP and stdio alike.
func refuseCall(id json.RawMessage, msg string) json.RawMessage {
	if len(id) == 0 {
		return nil
	}
	return appendRPCError(nil, id, RPCInvalidParams, msg)
}

// modernMCP tells a 2026-07-28 (or later) request, whose results say they
// are complete (resultType), as the SDKs' servers write them.
func modernMCP(r *http.Request) bool {
	return r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28"
}

// denyCallResult is a deny as the model reads it: a CallToolResult with
// isError, text naming the rule (or the code) and the reason, and the
// decision object under _meta. decision is the /v1/evaluate answer, with
// its trailing newline.
func denyCallResult(id json.RawMessage, res *engine.Result, decision []byte, modern bool) json.RawMessage {
	if len(id) == 0 {
		return nil
	}
	text := denyText(res)
	out := make([]byte, 0, 128+len(text)+len(decision))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":{"content":[{"type":"text","text":`...)
	out = engine.AppendJSONString(out, text)
	out = append(out, `}],"isError":true,`...)
	if modern {
		out = append(out, `"resultType":"complete",`...)
	}
	out = append(out, `"_meta":{"`+MetaDecision+`":`...)
	for len(decision) > 0 && decision[len(decision)-1] == '\n' {
		decision = decision[:len(decision)-1]
	}
	out = append(out, decision...)
	return append(out, "}}}"...)
}

// denyText is what a deny says to the model: the rule (or the code) and
// the reason.
func denyText(res *engine.Result) string {
	if text, ok := approvalText(res); ok {
		return text
	}
	why := res.MatchedRuleID
	if why == "" {
		why = string(res.Code)
	}
	if res.Reason == "" {
		return why + ": denied by toolgate"
	}
	return why + ": " + res.Reason
}

// answerDenied answers a POST holding a denied call, which is not
// forwarded at all: in a batch, every other request gets an error saying
// so (forwarding the rest would split what the client sent as one).
func (p *Proxy) answerDenied(w http.ResponseWriter, msgs []jsonrpc.Message, denied []json.RawMessage, batch bool) {
	if !batch {
		if denied[0] == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header()["Content-Type"] = jsonContentType
		_, _ = w.Write(append(denied[0], '\n'))
		return
	}
	out := []byte{'['}
	n := 0
	for i, m := range msgs {
		var a []byte
		switch {
		case denied[i] != nil:
			a = denied[i]
		case len(m.ID) > 0 && m.Method != "":
			a = appendRPCError(nil, m.ID, RPCNotForwarded, "toolgate: not forwarded: a tools/call in the same batch was denied")
		default:
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, a...)
		n++
	}
	if n == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header()["Content-Type"] = jsonContentType
	_, _ = w.Write(append(out, "]\n"...))
}

// modifyResponse is where tools/list answers are filtered (list.go) and
// tools/call results judged (result_proxy.go).
func (p *Proxy) modifyResponse(rt *mcpRoute) func(*http.Response) error {
	return func(resp *http.Response) error {
		info := mcpInfoOf(resp.Request.Context())
		stream := resp.StatusCode == http.StatusOK && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream"
		switch {
		case info == nil:
			// A 2025-11-25 session's GET stream: where the server's own
			// notifications go, and the proxy's; and where a resumed
			// POST stream replays its answers, tools/list's filtered too.
			if stream && resp.Request.Method == http.MethodGet {
				if p.d.State().Compiled.HasResultRules() {
					p.withholdReplayed(resp) // result_proxy.go
				}
				p.watchListStream(resp, rt, nil)
			}
		case info.results != nil:
			return p.judgeResults(rt, resp, info) // tools/list answers too
		case info.listIDs != nil:
			return p.filterList(rt, resp, info.listIDs)
		case info.listenID != nil && stream:
			p.watchListStream(resp, rt, info.listenID)
		}
		return nil
	}
}
