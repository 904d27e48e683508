package engine

import (
	"encoding/json"
	"slices"
	"strconv"
)

// castToNumber (issue 28): a condition may ask that the field, and its
// value or values, be read as numbers before eq, neq, in, not_in, gt, gte,
// lt or lte compare them. A string is a number when, once its ASCII
// whitespace is trimmed and one leading '+' dropped, it follows the JSON
// number grammar and fits a float64; a JSON number is itself. Hex ("0x10"),
// "inf", "NaN", "Infinity", underscores ("1_000"), "" and values out of
// float64's range never are. A field that is not a number (missing
// included) makes every such condition false, neq and not_in too: a cast
// condition states something about a number, and there is none.

// castOperators are the operators castToNumber applies to.
var castOperators = map[op]bool{opEq: true, opNeq: true, opIn: true, opNotIn: true, opGt: true, opGte: true, opLt: true, opLte: true}

// isASCIISpace is the whitespace castToNumber trims: space, \t, \n, \v,
// \f and \r.
func isASCIISpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// castNumber reads s as castToNumber does. It does not allocate.
func castNumber(s string) (float64, bool) {
	s = castSyntax(s)
	if !isJSONNumber(s) {
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

// castValue is how a cast condition sees a request value: a number as
// itself, a string through castNumber, anything else as no number.
func castValue(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		return castNumber(x)
	}
	return 0, false
}

// castReason says why a cast condition's field is not a number, for the
// trace; "" when it is one.
func castReason(v any, present bool) string {
	if !present {
		return "castToNumber: the field is missing"
	}
	if _, ok := castValue(v); ok {
		return ""
	}
	s, isString := v.(string)
	if !isString {
		k := kindObject
		switch v.(type) {
		case bool:
			k = kindBool
		case nil:
			k = kindNull
		case []any:
			k = kindArray
		}
		return "castToNumber: the field is " + k.String() + ", not a number"
	}
	if isJSONNumber(castSyntax(s)) {
		return "castToNumber: the field is out of the range of a 64-bit float"
	}
	return "castToNumber: the field is not a decimal number (hex, inf, NaN, underscores and empty strings never are)"
}

// CastOperand reads a castToNumber condition's value (one of its values)
// as compilation does; ok=false when it is no number, which is a compile
// error. For exporters, so that they read values as the engine does.
func CastOperand(raw json.RawMessage) (float64, bool) {
	s, err := parseScalar(raw)
	if err != nil {
		return 0, false
	}
	return castOperand(s)
}

// castOperand reads a cast condition's value at compile time: a JSON number,
// or a string castNumber reads.
func castOperand(s scalar) (float64, bool) {
	switch s.kind {
	case kindNumber:
		return s.num, true
	case kindString:
		return castNumber(s.str)
	}
	return 0, false
}

// castHolds evaluates a cast condition (one of castOperators).
func castHolds(cc *ccond, v any, present bool) bool {
	if !present {
		return false
	}
	f, ok := castValue(v)
	if !ok {
		return false
	}
	switch cc.op {
	case opEq:
		return f == cc.value.num
	case opNeq:
		return f != cc.value.num
	case opIn:
		_, found := slices.BinarySearch(cc.nums, f)
		return found
	case opNotIn:
		_, found := slices.BinarySearch(cc.nums, f)
		return !found
	case opGt:
		return f > cc.value.num
	case opGte:
		return f >= cc.value.num
	case opLt:
		return f < cc.value.num
	}
	return f <= cc.value.num
}

// checkCastOperand compiles a castToNumber condition: its operator must be
// one castToNumber applies to, and its value (each of its values) a number
// or a string castNumber reads.
func checkCastOperand(c *Condition, spec operatorSpec, cc *ccond, fail failFunc) {
	if !castOperators[spec.op] {
		fail(At("castToNumber"), "castToNumber applies only to eq, neq, in, not_in, gt, gte, lt and lte, not %s", c.Operator)
		return
	}
	cc.cast = true
	read := func(at Location, s scalar) (float64, bool) {
		f, ok := castOperand(s)
		if !ok {
			fail(at, "castToNumber: %s is not a number (want a JSON number or a string such as \"5000\", \" +5e3 \")", describeOperand(s))
		}
		return f, ok
	}
	if spec.kind == needsList {
		eachListOperand(c, fail, func(at Location, s scalar) {
			if f, ok := read(at, s); ok {
				cc.nums = append(cc.nums, f)
			}
		})
		slices.Sort(cc.nums)
		return
	}
	if singleOperand(c, cc, fail) {
		cc.value.num, _ = read(At("value"), cc.value)
	}
}

// describeOperand names a condition value in a message: a string quoted
// (truncated), another kind by its kind.
func describeOperand(s scalar) string {
	if s.kind == kindString {
		return strconv.Quote(truncate(s.str, 64))
	}
	return s.kind.String()
}
