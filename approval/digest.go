package approval

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/toolgate/toolgate/engine"
)

// Digest is "sha256:" and the hex SHA-256 of the call's arguments (input,
// args and kwargs, those present) as canonical JSON (Canonical). Any
// changed argument changes the digest; key order and spacing in the
// request do not.
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

// Canonical appends v (a decoded JSON value) to dst as canonical JSON, in
// the engine's compact form of decoded JSON (engine.Stringify, what
// policies match against), which is RFC 8785's for the values tools send:
// object keys sorted (by their UTF-8 bytes, which orders as RFC 8785's
// UTF-16 code units except between characters above U+FFFF and those from
// U+E000), no insignificant whitespace, strings escaped as JSON.stringify
// does (quote, backslash and control characters only; invalid UTF-8 as
// U+FFFD), numbers as JavaScript writes them (1 for 1.0 and 1e0, 1e-7,
// 1e+21).
func Canonical(dst []byte, v any) []byte {
	if s, ok := v.(string); ok {
		// Stringify gives a string as it is; as an array's element, quoted.
		q := engine.Stringify([]any{s})
		return append(dst, q[1:len(q)-1]...)
	}
	return append(dst, engine.Stringify(v)...)
}
