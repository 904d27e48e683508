package jsonrpc

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// Message is what the proxy reads of one JSON-RPC message a client
// POSTs: enough to route and decide, never re-encoded (what is forwarded is
// the client's bytes).
type Message struct {
	// ID is the raw id ("" for a notification or a malformed message).
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	// call is a tools/call's params, read once; nil when they are not an
	// object with a string name (such a call is refused, never forwarded).
	Call *ToolCall
	// Request is the params of the other requests decided (Decided), read
	// once; nil when they are not an object or a value read is of another
	// type than its field's (such a request is refused, never forwarded).
	Request *RequestParams
}

// ToolCall are the parts of tools/call params a decision reads.
type ToolCall struct {
	Name      *string         `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      Meta            `json:"_meta"`
	// meta is _meta as sent, when an object: what the proxy's own
	// tools/list carries for the client (params_learn.go).
	RawMeta json.RawMessage
}

// Meta is what a decision reads of a request's _meta.
type Meta struct {
	AgentID   *string `json:"toolgate.dev/agent_id"`
	SessionID *string `json:"toolgate.dev/session_id"`
}

// RequestParams are the parts of the params of the requests decided
// besides tools/call that a decision reads, each method its own: a
// prompt's name and arguments, a resource's uri, a completion's ref,
// argument and context.
type RequestParams struct {
	Name      *string         `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	URI       *string         `json:"uri"`
	Ref       json.RawMessage `json:"ref"`
	Argument  json.RawMessage `json:"argument"`
	Context   json.RawMessage `json:"context"`
	Meta      Meta            `json:"_meta"`
}

const (
	MethodToolsCall           = "tools/call"
	MethodToolsList           = "tools/list"
	MethodSubscriptionsListen = "subscriptions/listen"

	MethodResourcesRead      = "resources/read"
	MethodResourcesSubscribe = "resources/subscribe"
	MethodPromptsGet         = "prompts/get"
	MethodCompletionComplete = "completion/complete"
)

// Decided tells the methods decided besides tools/call, whose params
// Message.Request holds: what they read or complete reaches the agent as
// a tool's result does.
func Decided(method string) bool {
	switch method {
	case MethodResourcesRead, MethodResourcesSubscribe, MethodPromptsGet, MethodCompletionComplete:
		return true
	}
	return false
}

// WantsToolListChanges reads a subscriptions/listen request's params.
func WantsToolListChanges(params json.RawMessage) bool {
	var p struct {
		Notifications struct {
			ToolsListChanged bool `json:"toolsListChanged"`
		} `json:"notifications"`
	}
	return json.Unmarshal(params, &p) == nil && p.Notifications.ToolsListChanged
}

// maxLinearKeys is how many keys an object's duplicate check scans before
// it keeps a set instead.
const maxLinearKeys = 16

// errAmbiguousJSON refuses a body two JSON parsers could read differently:
// a key given twice in one object, or two keys differing only in case.
// encoding/json matches struct fields case-insensitively and most parsers
// keep the last duplicate, so {"name":"read_file","Name":"pay"} could be
// decided as one tool and run as another; such a body is never forwarded.
var errAmbiguousJSON = errors.New("ambiguous JSON")

// foldKey is what encoding/json's case-insensitive field match sees as
// equal: ASCII lowercased, and for other text upper- then lowercased, so
// the Kelvin sign folds with k and the long s with s.
func foldKey(k string) string {
	for i := 0; i < len(k); i++ {
		if k[i] >= utf8.RuneSelf {
			return strings.ToLower(strings.ToUpper(k))
		}
	}
	return strings.ToLower(k)
}
