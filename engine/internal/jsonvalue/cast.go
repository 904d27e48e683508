package jsonvalue

import "strconv"

// castToNumber (issue 28): a condition may ask that the field, and its
// value or values, be read as numbers before eq, neq, in, not_in, gt, gte,
// lt or lte compare them. A string is a number when, once its ASCII
// whitespace is trimmed and one leading '+' dropped, it follows the JSON
// number grammar and fits a float64; a JSON number is itself. Hex ("0x10"),
// "inf", "NaN", "Infinity", underscores ("1_000"), "" and values out of
// float64's range never are. A field that is not a number (missing
// included) makes every such condition false, neq and not_in too: a cast
// condition states something about a number, and there is none.

// isASCIISpace is the whitespace castToNumber trims: space, \t, \n, \v,
// \f and \r.
func isASCIISpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// CastNumber reads s as castToNumber does. It does not allocate.
func CastNumber(s string) (float64, bool) {
	s = castSyntax(s)
	if !IsJSONNumber(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil { // out of range
		return 0, false
	}
	return f, true
}

// castSyntax is s without its surrounding ASCII whitespace and one leading
// '+' before a digit: what must then be a JSON number.
func castSyntax(s string) string {
	for len(s) > 0 && isASCIISpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isASCIISpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	if len(s) > 1 && s[0] == '+' && s[1] >= '0' && s[1] <= '9' {
		s = s[1:]
	}
	return s
}

// CastValue is how a cast condition sees a request value: a number as
// itself, a string through CastNumber, anything else as no number.
func CastValue(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		return CastNumber(x)
	}
	return 0, false
}

// CastReason says why a cast condition's field is not a number, for the
// trace; "" when it is one.
func CastReason(v any, present bool) string {
	if !present {
		return "castToNumber: the field is missing"
	}
	if _, ok := CastValue(v); ok {
		return ""
	}
	s, isString := v.(string)
	if !isString {
		k := KindObject
		switch v.(type) {
		case bool:
			k = KindBool
		case nil:
			k = KindNull
		case []any:
			k = KindArray
		}
		return "castToNumber: the field is " + k.String() + ", not a number"
	}
	if IsJSONNumber(castSyntax(s)) {
		return "castToNumber: the field is out of the range of a 64-bit float"
	}
	return "castToNumber: the field is not a decimal number (hex, inf, NaN, underscores and empty strings never are)"
}

// CastOperand reads a cast condition's value at compile time: a JSON number,
// or a string CastNumber reads.
func CastOperand(s Scalar) (float64, bool) {
	switch s.Kind {
	case KindNumber:
		return s.Num, true
	case KindString:
		return CastNumber(s.Str)
	}
	return 0, false
}
