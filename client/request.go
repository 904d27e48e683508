package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/engine/request"
)

// Request is one tool call, in the sidecar's request fields. Only ToolName
// is required. Empty fields are not sent.
type Request struct {
	ToolName  string
	SessionID string
	AgentID   string
	// Input is the call's arguments as one object (MCP, Claude Agent SDK);
	// Args and Kwargs are positional and keyword arguments (LangChain,
	// plain functions). Any JSON-encodable value works.
	Input  any
	Args   any
	Kwargs any
	// ToolUseID and Framework are logged with the decision.
	ToolUseID string
	Framework string
	// Traceparent is a W3C traceparent, sent as the traceparent header so
	// the decision log line carries the caller's trace and span ids. Local
	// ignores it.
	Traceparent string
	// Extra holds any other field policies read (roles, resources,
	// environment, ...). A typed field above, when set, wins over the same
	// key here.
	Extra map[string]any

	// Wait, when positive, asks the sidecar to hold the answer of a call
	// an ask rule decides until a person approves or denies it, or Wait
	// ends (the sidecar caps it at the rule's approval.timeout): the
	// result is then an allow, or a deny coded APPROVAL_DENIED,
	// APPROVAL_TIMEOUT, ... Zero answers an ask at once. Evaluate's
	// timeout is Options.Timeout plus Wait. It is not a field of the call:
	// no rule reads it.
	Wait time.Duration
	// Approval names the ApprovalRequest an earlier ask answer gave
	// (Result.Approval.Name): this identical call is decided against it,
	// allowed once if it was approved. Not a field of the call either.
	Approval string
}

// Request fields of /v1/evaluate that are about waiting for a person, not
// about the call (the sidecar reads and removes them before deciding).
const (
	fieldWait     = "wait"
	fieldApproval = "approval"
)

// errNoToolName is the one request a caller can get wrong: every decision
// is about a named tool.
var errNoToolName = errors.New("toolgate: Request.ToolName is empty")

// MarshalJSON writes the request as the JSON object the sidecar reads
// (what Evaluate sends), Wait as a Go duration string ("1m30s").
func (r Request) MarshalJSON() ([]byte, error) {
	if err := r.checkAsk(); err != nil {
		return nil, err
	}
	m := r.fields()
	if r.Wait > 0 {
		m[fieldWait] = r.Wait.String()
	}
	setString(m, fieldApproval, r.Approval)
	return json.Marshal(m)
}

// checkAsk refuses a wait the sidecar would refuse (with a 400, which the
// client could only report as no decision).
func (r *Request) checkAsk() error {
	if r.Wait < 0 {
		return fmt.Errorf("toolgate: Request.Wait %v is negative: give how long to wait for a person's approval, or 0 not to wait", r.Wait)
	}
	return nil
}

// fields is the request as the JSON object the sidecar reads.
func (r *Request) fields() map[string]any {
	m := make(map[string]any, len(r.Extra)+8)
	for k, v := range r.Extra {
		m[k] = v
	}
	setString(m, request.FieldToolName, r.ToolName)
	setString(m, request.FieldSessionID, r.SessionID)
	setString(m, request.FieldAgentID, r.AgentID)
	setString(m, request.FieldToolUseID, r.ToolUseID)
	setString(m, request.FieldFramework, r.Framework)
	setAny(m, request.FieldInput, r.Input)
	setAny(m, request.FieldArgs, r.Args)
	setAny(m, request.FieldKwargs, r.Kwargs)
	return m
}

func setString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func setAny(m map[string]any, k string, v any) {
	if v != nil {
		m[k] = v
	}
}

// EngineRequest is the request as the engine reads it (what package local
// decides): values must be what encoding/json decodes (map[string]any,
// []any, float64, ...), or a map[string]string input or an int amount
// would not compare as the sidecar, which decodes JSON, compares them.
// Native values pass as they are; anything else takes one JSON round trip.
// The error is for a request that cannot be decided: an empty ToolName, a
// field that does not encode as JSON.
func (r *Request) EngineRequest() (request.Request, error) {
	if r.ToolName == "" {
		return nil, errNoToolName
	}
	m := r.fields()
	for k, v := range m {
		if jsonNative(v) {
			continue
		}
		doc, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("toolgate: request field %s: %w", k, err)
		}
		var back any
		if err := json.Unmarshal(doc, &back); err != nil {
			return nil, fmt.Errorf("toolgate: request field %s: %w", k, err)
		}
		m[k] = back
	}
	return request.Request(m), nil
}

// jsonNative reports whether v is made only of what encoding/json decodes
// into an any.
func jsonNative(v any) bool {
	switch x := v.(type) {
	case nil, string, float64, bool:
		return true
	case map[string]any:
		for _, e := range x {
			if !jsonNative(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !jsonNative(e) {
				return false
			}
		}
		return true
	}
	return false
}
