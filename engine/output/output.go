// Package output owns the request field engine.FieldOutput outside the
// MCP proxy: how a tool's return value becomes it (Of, for the Claude Code
// hook and the Go client; the Python and TypeScript clients build the
// same) and what a caller may send in it (Check, for /v1/evaluate and
// `toolgate eval --phase result`). It is pure, like the engine, and
// imports only its exported names.
package output

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/toolgate/toolgate/engine"
)

// Of is the output object for what a tool returned, v being what
// encoding/json decodes (string, float64, bool, nil, map[string]any,
// []any) or json.RawMessage: a string is the text as it is; an object or
// an array is structured, and its compact JSON (engine.Stringify: keys
// sorted, nothing escaped that need not be) is the text, so text rules
// read it too; a number or boolean is its JSON as text; nil is no text.
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
	out := map[string]any{engine.OutputIsError: false}
	var text string
	switch x := v.(type) {
	case nil:
	case string:
		text = x
	case map[string]any, []any:
		out[engine.OutputStructured] = x
		text = engine.Stringify(x)
	default:
		text = engine.Stringify(x)
	}
	out[engine.OutputText] = text
	out[engine.OutputSize] = float64(len(text))
	return out, nil
}

// Check refuses an output field a result rule could not read as the MCP
// proxy's: it must be an object whose keys are among text (a string),
// structured (any JSON), isError (a boolean) and size (a whole number of
// bytes, not negative). A key outside them is refused rather than ignored:
// a rule on output.text never sees a misspelt "txt".
func Check(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s must be an object {%s}, not %s", engine.FieldOutput, fieldList, kindOf(v))
	}
	for k, x := range m {
		switch k {
		case engine.OutputText:
			if _, ok := x.(string); !ok {
				return fmt.Errorf("%s.%s must be a string, not %s", engine.FieldOutput, k, kindOf(x))
			}
		case engine.OutputStructured:
		case engine.OutputIsError:
			if _, ok := x.(bool); !ok {
				return fmt.Errorf("%s.%s must be true or false, not %s", engine.FieldOutput, k, kindOf(x))
			}
		case engine.OutputSize:
			n, ok := x.(float64)
			if !ok || n < 0 || n != math.Trunc(n) || n > 1<<53 {
				return fmt.Errorf("%s.%s must be a whole number of bytes, not %s", engine.FieldOutput, k, clip(engine.Stringify(x)))
			}
		default:
			return fmt.Errorf("%s has a key %q: its keys are %s", engine.FieldOutput, clip(k), fieldList)
		}
	}
	return nil
}

var fieldList = strings.Join([]string{engine.OutputText, engine.OutputStructured, engine.OutputIsError, engine.OutputSize}, ", ")

// kindOf names a decoded JSON value's kind for an error.
func kindOf(v any) string {
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

// clip keeps an error about a caller's value short.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
