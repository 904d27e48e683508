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

// ErrTooManyElements is wrapped, with ErrBadRequest, by the error for a
// request holding more JSON values than its decoder's limit.
var ErrTooManyElements = errors.New("too many JSON values")

// DefaultMaxElements is how many JSON values DecodeRequest accepts in one
// request. Width, not bytes, is what costs: 1 MiB of [{},{},...] decodes
// into some 350,000 maps, about 40 MB, in one request. Ordinary tool calls
// hold tens of values; a 1536-float embedding or a 100 x 50 table still
// fits.
const DefaultMaxElements = 10000

// DecodeRequest parses a request document: a JSON object with a string
// tool_name, holding at most DefaultMaxElements JSON values. Numbers decode
// as float64, so they compare as the policy language defines
// (5000 == 5000.0).
func DecodeRequest(doc []byte) (Request, error) {
	return DecodeRequestLimit(doc, DefaultMaxElements)
}

// DecodeRequestLimit is DecodeRequest with at most maxElements JSON values:
// every object, array, string, number, boolean and null counts one, the
// request object included (object keys do not count). maxElements <= 0
// means no limit. Past the limit decoding stops, without building the rest,
// and the error wraps ErrTooManyElements; the limit applies the same on
// the fast path and on the encoding/json fallback.
func DecodeRequestLimit(doc []byte, maxElements int) (Request, error) {
	obj, outcome := decodeFast(doc, maxElements)
	switch outcome {
	case fastDecoded:
		req := Request(obj)
		if err := req.Validate(); err != nil {
			return nil, err
		}
		return req, nil
	case fastTooMany:
		return nil, tooManyElements(maxElements)
	}
	return decodeRequestStd(doc, maxElements)
}

func tooManyElements(maxElements int) error {
	return fmt.Errorf("%w: %w: the request holds more than %d (every object, array, string, number, boolean and null counts one)",
		ErrBadRequest, ErrTooManyElements, maxElements)
}

// decodeRequestStd is DecodeRequestLimit by encoding/json alone: the
// fallback, and the baseline the fast decoder is fuzzed and benchmarked
// against. encoding/json builds the whole value before anyone could count
// it, so the values are counted first, by a scan that allocates nothing.
func decodeRequestStd(doc []byte, maxElements int) (Request, error) {
	if maxElements > 0 && countElements(doc, maxElements) > maxElements {
		return nil, tooManyElements(maxElements)
	}
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

// countElements counts the JSON values in doc, stopping once the count
// passes limit. In a valid document every value is the top one, follows a
// comma, or opens a non-empty container, so the count is 1 + commas +
// non-empty containers, with strings skipped; on an invalid document it is
// only an estimate, and encoding/json rejects the document anyway.
// FuzzFastDecoder checks it against the fast decoder's own count.
func countElements(doc []byte, limit int) int {
	n := 1
	for i := 0; i < len(doc) && n <= limit; i++ {
		switch doc[i] {
		case '"':
			for i++; i < len(doc) && doc[i] != '"'; i++ {
				if doc[i] == '\\' {
					i++
				}
			}
		case ',':
			n++
		case '{', '[':
			j := i + 1
			for j < len(doc) && (doc[j] == ' ' || doc[j] == '\t' || doc[j] == '\n' || doc[j] == '\r') {
				j++
			}
			if j < len(doc) && doc[j] != '}' && doc[j] != ']' {
				n++
			}
		}
	}
	return n
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
