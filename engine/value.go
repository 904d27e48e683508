package engine

import (
	"github.com/toolgate/toolgate/engine/decision"
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// Stringify is how operators that compare text see a request value: strings
// as-is, numbers in shortest round-trip decimal (5000, not 5000.0 or 5e+03),
// booleans and null as their JSON words, objects and arrays as compact JSON.
func Stringify(v any) string { return jsonvalue.Stringify(v) }

// FormatNumber formats like JavaScript's Number#toString, which the policy
// language inherited: plain decimals between 1e-6 and 1e21, exponent form
// outside (1e+21, 1e-7).
func FormatNumber(f float64) string { return jsonvalue.FormatNumber(f) }

// AppendJSONString quotes s as encoding/json would, without allocating.
func AppendJSONString(dst []byte, s string) []byte { return decision.AppendJSONString(dst, s) }

// AppendNullableJSONString writes null for "", else AppendJSONString.
func AppendNullableJSONString(dst []byte, s string) []byte {
	return jsonvalue.AppendNullableString(dst, s)
}
