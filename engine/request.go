package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Request is one tool call, as decoded JSON: tool_name (a string) and
// optionally agent_id, session_id, input, args, kwargs, tool_use_id,
// framework and anything else policies refer to. Values must be what
// encoding/json produces (map[string]any, []any, string, float64, bool, nil).
type Request map[string]any

// ErrBadRequest is wrapped by every DecodeRequest error.
var ErrBadRequest = errors.New("bad request")

// DecodeRequest parses a request document: a JSON object with a string
// tool_name. Numbers decode as float64, so they compare as the policy
// language defines (5000 == 5000.0).
func DecodeRequest(doc []byte) (Request, error) {
	if obj, ok := decodeObjectFast(doc); ok {
		req := Request(obj)
		if err := req.Validate(); err != nil {
			return nil, err
		}
		return req, nil
	}
	return decodeRequestStd(doc)
}

// decodeRequestStd is DecodeRequest by encoding/json alone: the fallback,
// and the baseline the fast decoder is fuzzed and benchmarked against.
func decodeRequestStd(doc []byte) (Request, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: not valid JSON: %v", ErrBadRequest, err)
	}
	if rest := bytes.TrimLeft(doc[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrBadRequest)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the request must be a JSON object, not %s", ErrBadRequest, jsonKind(v))
	}
	req := Request(obj)
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return req, nil
}

// Validate checks the one field every request needs.
func (r Request) Validate() error {
	t, present := r["tool_name"]
	if !present {
		return fmt.Errorf("%w: tool_name is required", ErrBadRequest)
	}
	if _, ok := t.(string); !ok {
		return fmt.Errorf("%w: tool_name must be a string, not %s", ErrBadRequest, jsonKind(t))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
