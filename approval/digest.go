package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"

	"github.com/toolgate/toolgate/engine"
)

// Digest is "sha256:" and the hex SHA-256 of the call's arguments (input,
// args and kwargs, those present) as canonical JSON: object keys sorted by
// their UTF-16 code units' byte order as RFC 8785 does for the ASCII keys
// tools use (here, Go's byte order of the UTF-8 keys), no insignificant
// whitespace, strings escaped as encoding/json does without HTML escaping,
// numbers in their shortest round-trip form. Any changed argument changes
// the digest; key order and spacing in the request do not.
func Digest(req engine.Request) string {
	args := make(map[string]any, 3)
	for _, k := range []string{engine.FieldInput, engine.FieldArgs, engine.FieldKwargs} {
		if v, ok := req[k]; ok {
			args[k] = v
		}
	}
	sum := sha256.Sum256(Canonical(nil, args))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Canonical appends v (a decoded JSON value) to dst as canonical JSON.
func Canonical(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return appendString(dst, x)
	case float64:
		return appendNumber(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = Canonical(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = Canonical(dst, x[k])
		}
		return append(dst, '}')
	default:
		// A request holds only decoded JSON; anything else is written by
		// its type so two different values never share a digest.
		return appendString(dst, "\x00unsupported")
	}
}

func appendString(dst []byte, s string) []byte { return engine.AppendJSONString(dst, s) }

// appendNumber writes integers without exponent and other numbers in
// their shortest form, so 1, 1.0 and 1e0 digest alike.
func appendNumber(dst []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(dst, "null"...)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}
