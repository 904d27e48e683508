package engine

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// castToNumber (issue 28): a condition may ask that the field, and its
// value or values, be read as numbers before eq, neq, in, not_in, gt, gte,
// lt or lte compare them; what reads as a number is jsonvalue.CastNumber's
// to say. A field that is not a number (missing included) makes every such
// condition false, neq and not_in too: a cast condition states something
// about a number, and there is none.

// castOperators are the operators castToNumber applies to.
var castOperators = map[op]bool{opEq: true, opNeq: true, opIn: true, opNotIn: true, opGt: true, opGte: true, opLt: true, opLte: true}

// CastOperand reads a castToNumber condition's value (one of its values)
// as compilation does; ok=false when it is no number, which is a compile
// error. For exporters, so that they read values as the engine does.
func CastOperand(raw json.RawMessage) (float64, bool) {
	s, err := jsonvalue.ParseScalar(raw)
	if err != nil {
		return 0, false
	}
	return jsonvalue.CastOperand(s)
}

// castHolds evaluates a cast condition (one of castOperators).
func castHolds(cc *ccond, v any, present bool) bool {
	if !present {
		return false
	}
	f, ok := jsonvalue.CastValue(v)
	if !ok {
		return false
	}
	switch cc.op {
	case opEq:
		return f == cc.value.Num
	case opNeq:
		return f != cc.value.Num
	case opIn:
		_, found := slices.BinarySearch(cc.nums, f)
		return found
	case opNotIn:
		_, found := slices.BinarySearch(cc.nums, f)
		return !found
	case opGt:
		return f > cc.value.Num
	case opGte:
		return f >= cc.value.Num
	case opLt:
		return f < cc.value.Num
	}
	return f <= cc.value.Num
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
	read := func(at Location, s jsonvalue.Scalar) (float64, bool) {
		f, ok := jsonvalue.CastOperand(s)
		if !ok {
			fail(at, "castToNumber: %s is not a number (want a JSON number or a string such as \"5000\", \" +5e3 \")", describeOperand(s))
		}
		return f, ok
	}
	if spec.kind == needsList {
		eachListOperand(c, fail, func(at Location, s jsonvalue.Scalar) {
			if f, ok := read(at, s); ok {
				cc.nums = append(cc.nums, f)
			}
		})
		slices.Sort(cc.nums)
		return
	}
	if singleOperand(c, cc, fail) {
		cc.value.Num, _ = read(At("value"), cc.value)
	}
}

// describeOperand names a condition value in a message: a string quoted
// (truncated), another kind by its kind.
func describeOperand(s jsonvalue.Scalar) string {
	if s.Kind == jsonvalue.KindString {
		return strconv.Quote(jsonvalue.Truncate(s.Str, 64))
	}
	return s.Kind.String()
}
