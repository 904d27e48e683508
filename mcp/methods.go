package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// The requests decided besides tools/call: what a resource read, a prompt
// or a completion returns reaches the model as a tool's result does, so
// each is decided as a call is, through the same decision path (decision
// log line, metrics, limits, freezes), with the request
//
//	resources/read, resources/subscribe  tool_name: the method, action: read,     input: {"uri": params.uri}
//	prompts/get                          tool_name: the prompt, action: get,      input: params.arguments
//	completion/complete                  tool_name: the method, action: complete, input: {"ref", "argument", "context"}
//
// A subscription is decided as a read: it is how the agent learns a
// resource changed, and a rule written for reading a URI covers it. A
// resource's or completion's tool_name is its method, since those have no
// name of their own a policy could target; a prompt has one, as a tool
// does, and its action tells the two apart. Values are read as
// encoding/json reads them (keys case-insensitively, jsonrpc.RequestParams),
// so `{"URI": ...}`, which Go servers bind to uri, is decided as the uri.

// Actions of the requests decided besides tools/call, the request's
// action field (engine.FieldAction; "call" for tools/call).
const (
	ActionCall     = "call"
	ActionRead     = "read"
	ActionGet      = "get"
	ActionComplete = "complete"
)

// boxedAction is action as a request field: each known action's
// constant, which goes into an interface without the allocation a string
// variable costs on every call.
func boxedAction(action string) any {
	switch action {
	case ActionCall:
		return ActionCall
	case ActionRead:
		return ActionRead
	case ActionGet:
		return ActionGet
	case ActionComplete:
		return ActionComplete
	}
	return action
}

// subject is one request as it is decided: the engine request's
// tool_name, action and input, and the _meta a decision reads.
type subject struct {
	tool, action string
	input        json.RawMessage
	meta         jsonrpc.Meta
}

// subjectOf is what m asks to be decided; refusal is the reason it cannot
// be decided (its params are not what its method requires), "" otherwise.
// m is a tools/call or another method Decided.
func subjectOf(m *jsonrpc.Message) (s subject, refusal string) {
	if m.Method == jsonrpc.MethodToolsCall {
		if m.Call == nil {
			return s, msgBadCallParams
		}
		return subject{tool: *m.Call.Name, action: ActionCall, input: m.Call.Arguments, meta: m.Call.Meta}, ""
	}
	p := m.Request
	if p == nil {
		return s, fmt.Sprintf("toolgate: %s params must be an object whose values have the types MCP gives them; not forwarded", m.Method)
	}
	s.meta = p.Meta
	switch m.Method {
	case jsonrpc.MethodResourcesRead, jsonrpc.MethodResourcesSubscribe:
		if p.URI == nil {
			return s, fmt.Sprintf("toolgate: %s params must hold a string uri; not forwarded", m.Method)
		}
		s.tool, s.action, s.input = m.Method, ActionRead, uriInput(*p.URI)
	case jsonrpc.MethodPromptsGet:
		if p.Name == nil {
			return s, "toolgate: prompts/get params must hold a string name; not forwarded"
		}
		s.tool, s.action, s.input = *p.Name, ActionGet, p.Arguments
	case jsonrpc.MethodCompletionComplete:
		if !isObject(p.Ref) || !isObject(p.Argument) {
			return s, "toolgate: completion/complete params must hold a ref and an argument, both objects; not forwarded"
		}
		s.tool, s.action = m.Method, ActionComplete
		in := append(make([]byte, 0, len(p.Ref)+len(p.Argument)+len(p.Context)+40), `{"ref":`...)
		in = append(append(in, p.Ref...), `,"argument":`...)
		in = append(in, p.Argument...)
		if len(p.Context) > 0 && string(p.Context) != "null" {
			in = append(append(in, `,"context":`...), p.Context...)
		}
		s.input = append(in, '}')
	}
	return s, ""
}

// subscribesToResources tells a subscriptions/listen that subscribes to
// a resource (or cannot be read), which is decided.
func subscribesToResources(m *jsonrpc.Message) bool {
	if m.Method != jsonrpc.MethodSubscriptionsListen {
		return false
	}
	subs, refusal := listenSubjects(m.Params)
	return len(subs) > 0 || refusal != ""
}

// uriInput is a resource request's input, {"uri": uri}.
func uriInput(uri string) json.RawMessage {
	in := engine.AppendJSONString(append(make([]byte, 0, len(uri)+10), `{"uri":`...), uri)
	return append(in, '}')
}

func isObject(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }

// listenSubjects are the resources a subscriptions/listen subscribes to
// (notifications.resourceSubscriptions: 2026-07-28's resources/subscribe),
// each decided as a resources/subscribe; none when it subscribes to no
// resource. Read as encoding/json reads them, keys case-insensitively.
func listenSubjects(params json.RawMessage) (subs []subject, refusal string) {
	var p struct {
		Notifications *struct {
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
		Meta jsonrpc.Meta `json:"_meta"`
	}
	if len(params) > 0 && json.Unmarshal(params, &p) != nil {
		return nil, "toolgate: subscriptions/listen params must be an object, its resourceSubscriptions a list of strings; not forwarded"
	}
	if p.Notifications == nil {
		return nil, ""
	}
	for _, uri := range p.Notifications.ResourceSubscriptions {
		subs = append(subs, subject{tool: jsonrpc.MethodResourcesSubscribe, action: ActionRead, input: uriInput(uri), meta: p.Meta})
	}
	return subs, ""
}

// decided tells the messages decided: tools/call and the methods Decided.
func decided(method string) bool {
	return method == jsonrpc.MethodToolsCall || jsonrpc.Decided(method)
}

// RPCDenied is the JSON-RPC error code of a request other than tools/call
// that was denied: those have no result that can say "error" as a
// CallToolResult's isError does. Not -32001 to -32005: the Go SDK's
// client reads -32003 and -32004 as its connection closing, and MCP gives
// -32002 to a resource not found, -32020 to -32022 and -32042 meanings of
// their own.
const RPCDenied = -32030

// denyAnswer is what the agent gets for a denied request (nil for a
// notification): for tools/call, a CallToolResult it can read and adapt
// to (denyCallResult); for the other methods, a JSON-RPC error with the
// same text as message and the decision object as data under
// MetaDecision.
func denyAnswer(id json.RawMessage, method string, res *engine.Result, decision []byte, modern bool) json.RawMessage {
	if len(id) == 0 {
		return nil
	}
	if method == jsonrpc.MethodToolsCall {
		return denyCallResult(id, res, decision, modern)
	}
	text := denyText(res)
	out := make([]byte, 0, 96+len(text)+len(decision))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = fmt.Appendf(out, `,"error":{"code":%d,"message":`, RPCDenied)
	out = engine.AppendJSONString(out, text)
	out = append(out, `,"data":{"`+MetaDecision+`":`...)
	for len(decision) > 0 && decision[len(decision)-1] == '\n' {
		decision = decision[:len(decision)-1]
	}
	out = append(out, decision...)
	return append(out, "}}}"...)
}

// checkRequestName refuses an Mcp-Name header (names: its values) that
// disagrees with a prompts/get's name or a resources/read's uri, which
// 2026-07-28 clients mirror in it as they mirror a tool's name.
func checkRequestName(names []string, m *jsonrpc.Message) error {
	if len(names) != 1 || m.Request == nil {
		return nil // none, or refused by the decision (subjectOf)
	}
	var body *string
	switch m.Method {
	case jsonrpc.MethodPromptsGet:
		body = m.Request.Name
	case jsonrpc.MethodResourcesRead:
		body = m.Request.URI
	}
	if body == nil {
		return nil
	}
	hname, err := decodeHeaderName(names[0])
	if err != nil {
		return err
	}
	if hname != *body {
		return fmt.Errorf("the Mcp-Name header %q does not match the body's %q of %s; refused so the request decided is the request run", hname, *body, m.Method)
	}
	return nil
}
