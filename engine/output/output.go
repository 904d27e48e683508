// Package output builds the request field request.FieldOutput from what a
// tool returned (Of), for the Claude Code hook and the Go client; the
// Python and TypeScript clients build the same, and the MCP proxy builds
// it from a CallToolResult. What a caller may send in it is the engine's
// to check (request.Request.Validate). It is pure, like the engine, and
// imports only the request's vocabulary and the engine's JSON value
// helpers, so that the Go client need not import the evaluator.
package output

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
	"github.com/toolgate/toolgate/engine/request"
)

// Of is the output object for what a tool returned, v being what
// encoding/json decodes (string, float64, bool, nil, map[string]any,
// []any) or json.RawMessage: a string is the text as it is; an object or
// an array is structured, and its compact JSON (as engine.Stringify
// writes it: keys sorted, nothing escaped that need not be) is the text,
// so text rules read it too; a number or boolean is its JSON as text; nil is no text.
// size is the text's length in bytes; isError is false (the tool
// returned). Any other Go value is encoded as JSON and decoded first, as a
// sidecar would see it.
func Of(v any) (map[string]any, error) {
	switch x := v.(type) {
	case json.RawMessage:
		var back any
		if err := json.Unmarshal(x, &back); err != nil {
			return nil, fmt.Errorf("the tool's output is not JSON: %w", err)
		}
		v = back
	case string, float64, bool, nil:
	default:
		// Objects and arrays take one JSON round trip too: a map may hold
		// values that are not JSON (a func, a channel), and rules compare
		// what a sidecar would decode.
		doc, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("the tool's output does not encode as JSON: %w", err)
		}
		var back any
		if err := json.Unmarshal(doc, &back); err != nil {
			return nil, fmt.Errorf("the tool's output does not encode as JSON: %w", err)
		}
		v = back
	}
	out := map[string]any{request.OutputIsError: false}
	var text string
	switch x := v.(type) {
	case nil:
	case string:
		text = x
	case map[string]any, []any:
		out[request.OutputStructured] = x
		text = jsonvalue.Stringify(x)
	default:
		text = jsonvalue.Stringify(x)
	}
	out[request.OutputText] = text
	out[request.OutputSize] = float64(len(text))
	return out, nil
}
