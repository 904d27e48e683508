package jsonvalue

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Stringify is how operators that compare text see a request value: strings
// as-is, numbers in shortest round-trip decimal (5000, not 5000.0 or 5e+03),
// booleans and null as their JSON words, objects and arrays as compact JSON.
func Stringify(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return FormatNumber(x)
	case bool:
		if x {
			return "true"
		}
		return "false"
	case nil:
		return "null"
	default:
		return string(AppendCompact(nil, x))
	}
}

// AppendCompact writes decoded JSON as JSON.stringify would: compact, no
// HTML or U+2028 escaping (encoding/json does both), object keys sorted
// because decoding lost their order.
func AppendCompact(dst []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return AppendQuoted(dst, x, false)
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
			dst = AppendQuoted(dst, k, false)
			dst = append(dst, ':')
			dst = AppendCompact(dst, x[k])
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendCompact(dst, e)
		}
		return append(dst, ']')
	case float64, bool, nil:
		return append(dst, Stringify(x)...)
	default: // not produced by encoding/json; best effort
		b, err := json.Marshal(x)
		if err != nil {
			return append(dst, "null"...)
		}
		return append(dst, b...)
	}
}

// AppendQuoted writes s as a JSON string. With htmlSafe it escapes exactly
// as encoding/json does (<, >, &, U+2028, U+2029), for API responses;
// without, as JSON.stringify does, for what policies match against.
// Runs of bytes that need no escape are copied whole, not a byte at a
// time: every answer's reason and revision pass here.
func AppendQuoted(dst []byte, s string, htmlSafe bool) []byte {
	const hex = "0123456789abcdef"
	plain := &plainJSON
	if htmlSafe {
		plain = &plainHTMLSafeJSON
	}
	dst = append(dst, '"')
	from := 0 // s[from:i] is still to be copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if !(r == utf8.RuneError && size == 1) && !(htmlSafe && (r == '\u2028' || r == '\u2029')) {
				i += size // valid and not escaped: part of the run
				continue
			}
			dst = append(dst, s[from:i]...)
			if r == utf8.RuneError {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			}
			i += size
			from = i
			continue
		}
		dst = append(dst, s[from:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default: // other control bytes, and <, >, & when htmlSafe
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		from = i
	}
	dst = append(dst, s[from:]...)
	return append(dst, '"')
}

// plainJSON marks the ASCII bytes a JSON string holds unescaped;
// plainHTMLSafeJSON the same without <, > and &. Bytes from
// utf8.RuneSelf up are false: AppendQuoted decodes them.
var plainJSON, plainHTMLSafeJSON = func() (plain, htmlSafe [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
		htmlSafe[c] = plain[c] && c != '<' && c != '>' && c != '&'
	}
	return plain, htmlSafe
}()

// FormatNumber formats like JavaScript's Number#toString, which the policy
// language inherited: plain decimals between 1e-6 and 1e21, exponent form
// outside (1e+21, 1e-7).
func FormatNumber(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // 1e-07, 1.5e+22
	if i := strings.IndexByte(s, 'e'); i >= 0 && i+2 < len(s) && s[i+2] == '0' && len(s) > i+3 {
		s = s[:i+2] + s[i+3:]
	}
	return s
}

// NumberOf is how numeric operators see a request value: a number, or a string
// that is a JSON number ("1000", "1e3"); anything else is not a number.
func NumberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		if !IsJSONNumber(x) {
			return 0, false
		}
		f, err := strconv.ParseFloat(x, 64)
		if err != nil { // out of range
			return 0, false
		}
		return f, true
	}
	return 0, false
}

// IsJSONNumber reports whether s follows the JSON number grammar, so that
// strconv's extras (hex, "inf", "NaN", underscores) never count as numbers.
func IsJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		start := i + 1
		if i = skipDigits(s, start); i == start {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		if i = skipDigits(s, i); i == start {
			return false
		}
	}
	return i == len(s)
}

// skipDigits is the index of the first byte of s from i that is not an
// ASCII digit.
func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// IsEmpty: missing, null, "", [] and {} are empty.
func IsEmpty(v any, present bool) bool {
	if !present {
		return true
	}
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// KindName names a decoded JSON value's kind for errors: "a string", "a
// number", "an object" ...
func KindName(v any) string {
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

// Truncate cuts s to at most n bytes on a rune boundary, marked with
// "...": how messages and traces quote what a caller or a policy wrote.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// AppendString quotes s as encoding/json would, without allocating.
func AppendString(dst []byte, s string) []byte { return AppendQuoted(dst, s, true) }

// AppendNullableString writes null for "", else AppendString.
func AppendNullableString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return AppendString(dst, s)
}
