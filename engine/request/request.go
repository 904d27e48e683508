// Package request is the request document: one tool call as decoded
// JSON, the fields toolgate gives a meaning to, the paths that name a
// field (ParsePath: conditions, --log-fields and --redact read them
// alike), and its decoding (a fast path exactly equal to encoding/json,
// an element limit) and validation.
// It is what a caller sends and what the engine evaluates; engine names
// each of its exported names too.
package request

import (
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/engine/internal/fastjson"
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// Request is one tool call, as decoded JSON: tool_name (a string) and
// optionally agent_id, session_id, input, args, kwargs, tool_use_id,
// framework and anything else policies refer to. Values must be what
// encoding/json produces (map[string]any, []any, string, float64, bool, nil).
type Request map[string]any

// The request fields toolgate gives a meaning to, by their JSON names:
// what clients write, the sidecar binds and the engine reads. A policy
// may read any other field too.
const (
	// FieldToolName is the tool called: the one required field, a string.
	FieldToolName = "tool_name"
	// FieldAgentID is the agent calling; FrozenAgents and agent limits
	// key on it (folded, see engine.SameAgent).
	FieldAgentID = "agent_id"
	// FieldSessionID is the agent's session; session limits key on it.
	FieldSessionID = "session_id"
	// FieldToolUseID and FieldFramework are logged with the decision.
	FieldToolUseID = "tool_use_id"
	FieldFramework = "framework"
	// FieldInput is the call's arguments as one object (MCP, Claude Agent
	// SDK); FieldArgs and FieldKwargs are positional and keyword
	// arguments (LangChain, plain functions).
	FieldInput  = "input"
	FieldArgs   = "args"
	FieldKwargs = "kwargs"
	// FieldRoles (a list of strings) and FieldEnvironment (a string) are
	// what subjects.roles and when.environments match; a sidecar binds
	// them, with FieldAgentID, from its own flags.
	FieldRoles       = "roles"
	FieldEnvironment = "environment"
	// FieldServer is the MCP server called (else derived from an
	// mcp__<server>__<tool> tool name); FieldResources are the objects
	// the call acts on, each {type, name, sensitivity}.
	FieldServer    = "server"
	FieldResources = "resources"
	// FieldAction ("call" when absent), FieldSideEffect,
	// FieldActorConfidence ("unknown" when absent), FieldSensitivity and
	// FieldContext are what a gateway rule's select and when read.
	FieldAction          = "action"
	FieldSideEffect      = "side_effect"
	FieldActorConfidence = "actor_confidence"
	FieldSensitivity     = "sensitivity"
	FieldContext         = "context"
	// FieldTokens is what a call consumes of a tokenBudget.
	FieldTokens = "tokens"
)

// ErrBadRequest is wrapped by every Decode error.
var ErrBadRequest = errors.New("bad request")

// ErrTooManyElements is wrapped, with ErrBadRequest, by the error for a
// request holding more JSON values than its decoder's limit.
var ErrTooManyElements = errors.New("too many JSON values")

// DefaultMaxElements is how many JSON values Decode accepts in one
// request. Width, not bytes, is what costs: 1 MiB of [{},{},...] decodes
// into some 350,000 maps, about 40 MB, in one request. Ordinary tool calls
// hold tens of values; a 1536-float embedding or a 100 x 50 table still
// fits.
const DefaultMaxElements = 10000

// Decode parses a request document: a JSON object with a string
// tool_name, holding at most DefaultMaxElements JSON values. Numbers decode
// as float64, so they compare as the policy language defines
// (5000 == 5000.0).
func Decode(doc []byte) (Request, error) {
	return DecodeLimit(doc, DefaultMaxElements)
}

// DecodeLimit is Decode with at most maxElements JSON values:
// every object, array, string, number, boolean and null counts one, the
// request object included (object keys do not count). maxElements <= 0
// means no limit. Past the limit decoding stops, without building the rest,
// and the error wraps ErrTooManyElements; the limit applies the same on
// the fast path and on the encoding/json fallback.
func DecodeLimit(doc []byte, maxElements int) (Request, error) {
	return checked(DecodeObject(doc, maxElements))
}

// checked is a decoded object as a request, once Validate passes.
func checked(obj map[string]any, err error) (Request, error) {
	if err != nil {
		return nil, err
	}
	req := Request(obj)
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return req, nil
}

// DecodeObject decodes one JSON object as DecodeLimit does (the
// fast decoder, else encoding/json; numbers as float64; at most
// maxElements values), without checking it is a request: for documents
// that hold one, such as a decision-log line.
func DecodeObject(doc []byte, maxElements int) (map[string]any, error) {
	return DecodeObjectSized(doc, maxElements, 0)
}

// DecodeObjectSized is DecodeObject for documents whose top-level object
// usually holds about fields members (a decision-log line: some 15), made
// that large at once rather than grown.
func DecodeObjectSized(doc []byte, maxElements, fields int) (map[string]any, error) {
	obj, outcome := fastjson.ObjectSized(doc, maxElements, fields)
	switch outcome {
	case fastjson.Decoded:
		return obj, nil
	case fastjson.TooMany:
		return nil, tooManyElements(maxElements)
	}
	return decodeObjectStd(doc, maxElements)
}

func tooManyElements(maxElements int) error {
	return fmt.Errorf("%w: %w: the request holds more than %d (every object, array, string, number, boolean and null counts one)",
		ErrBadRequest, ErrTooManyElements, maxElements)
}

// decodeStd is DecodeLimit by encoding/json alone: the
// fallback, and the baseline the fast decoder is fuzzed and benchmarked
// against. encoding/json builds the whole value before anyone could count
// it, so the values are counted first, by a scan that allocates nothing.
func decodeStd(doc []byte, maxElements int) (Request, error) {
	return checked(decodeObjectStd(doc, maxElements))
}

func decodeObjectStd(doc []byte, maxElements int) (map[string]any, error) {
	if maxElements > 0 && fastjson.Count(doc, maxElements) > maxElements {
		return nil, tooManyElements(maxElements)
	}
	v, err := decodeJSON(doc, "object")
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the request must be a JSON object, not %s", ErrBadRequest, jsonvalue.KindName(v))
	}
	return obj, nil
}

// Validate checks the one field every request needs, and refuses a known
// field spelled another way (checkFieldSpelling).
func (r Request) Validate() error {
	if err := checkFieldSpelling(r); err != nil {
		return err
	}
	t, present := r[FieldToolName]
	if !present {
		return fmt.Errorf("%w: tool_name is required", ErrBadRequest)
	}
	if _, ok := t.(string); !ok {
		return fmt.Errorf("%w: tool_name must be a string, not %s", ErrBadRequest, jsonvalue.KindName(t))
	}
	if o, present := r[FieldOutput]; present {
		return checkOutput(o)
	}
	return nil
}
