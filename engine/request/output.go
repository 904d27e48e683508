package request

import (
	"fmt"
	"math"

	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// FieldOutput is what a tool returned, in result evaluations: an object
// with OutputText, OutputStructured, OutputIsError and OutputSize, the
// shape the MCP proxy builds from a CallToolResult and /v1/evaluate
// callers send.
const FieldOutput = "output"

// The keys of FieldOutput.
const (
	// OutputText is the result's text content, its text blocks joined with
	// newlines (a string).
	OutputText = "text"
	// OutputStructured is the result's structuredContent (any JSON).
	OutputStructured = "structured"
	// OutputIsError is the result's isError (a boolean).
	OutputIsError = "isError"
	// OutputSize is the result's size in bytes (a number).
	OutputSize = "size"
)

// checkOutput refuses an output (FieldOutput) that is not the object
// result rules read: text a string, structured any JSON, isError a
// boolean, size a non-negative integer, and nothing else (a misspelt key
// would leave a rule on output.text reading nothing).
func checkOutput(v any) error {
	o, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: output must be an object (text, structured, isError, size), not %s", ErrBadRequest, jsonvalue.KindName(v))
	}
	for k, x := range o {
		switch k {
		case OutputText:
			if _, ok := x.(string); !ok {
				return fmt.Errorf("%w: output.text must be a string, not %s", ErrBadRequest, jsonvalue.KindName(x))
			}
		case OutputStructured:
		case OutputIsError:
			if _, ok := x.(bool); !ok {
				return fmt.Errorf("%w: output.isError must be a boolean, not %s", ErrBadRequest, jsonvalue.KindName(x))
			}
		case OutputSize:
			if f, ok := x.(float64); !ok || f < 0 || f != math.Trunc(f) || f > 1<<53 {
				return fmt.Errorf("%w: output.size must be a non-negative integer (bytes), not %s", ErrBadRequest, describeNumber(x))
			}
		default:
			return fmt.Errorf("%w: unknown output field %q (want %s, %s, %s or %s)", ErrBadRequest, jsonvalue.Truncate(k, 64), OutputText, OutputStructured, OutputIsError, OutputSize)
		}
	}
	return nil
}

func describeNumber(x any) string {
	if f, ok := x.(float64); ok {
		return fmt.Sprint(f)
	}
	return jsonvalue.KindName(x)
}
