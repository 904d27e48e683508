package engine

import (
	"encoding/json"
	"slices"

	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
	"github.com/toolgate/toolgate/engine/internal/stringset"
	"github.com/toolgate/toolgate/engine/request"
)

// operandCheck compiles a condition's value for one operand kind into cc and
// reports what is wrong with it. The operator table says which check runs.
type operandCheck func(k *compiler, c *Condition, spec operatorSpec, cc *ccond, fail failFunc)

var operandChecks = map[operandKind]operandCheck{
	needsNothing:   checkNoOperand,
	needsList:      checkListOperand,
	needsScalar:    checkScalarOperand,
	needsString:    checkStringOperand,
	needsNumber:    checkNumberOperand,
	needsDetectors: checkDetectOperand,
}

// conditionTree compiles condition ci of a rule, or one member of a group
// in it (base is the member's location in condition ci): a test, or an any
// group (at the top) of tests and all groups (inside any) of tests.
func (k *compiler) conditionTree(d *diagnoser, ri int, rid string, ci int, base Location, c *Condition, depth int) (ccond, bool) {
	if c.Any == nil && c.All == nil {
		cc, ok := k.condition(d, ri, rid, ci, base, c)
		if ok {
			cc.slot = k.slot(c.Field)
		}
		return cc, ok
	}
	fail := func(at Location, format string, args ...any) {
		d.condf(ri, rid, ci, append(slices.Clip(base), at...), format, args...)
	}
	name, members, cop := "any", c.Any, opAny
	if c.Any == nil {
		name, members, cop = "all", c.All, opAll
	}
	switch {
	case c.Any != nil && c.All != nil:
		fail(At("all"), "set any or all, not both")
		return ccond{}, false
	case c.Field != "" || c.Operator != "" || len(c.Value) > 0 || c.Values != nil:
		fail(At(name), "a group has no field, operator, value or values of its own")
		return ccond{}, false
	case c.CastToNumber:
		fail(At("castToNumber"), "castToNumber belongs on the group's tests, not on the group")
		return ccond{}, false
	case depth == 0 && cop == opAll:
		fail(At("all"), "all at the top level is what conditions already mean: list its members as conditions")
		return ccond{}, false
	case depth == 1 && cop == opAny:
		fail(At("any"), "any inside any: list its members in the outer any")
		return ccond{}, false
	case depth >= 2:
		fail(At(name), "groups nest at most any -> all -> test")
		return ccond{}, false
	case len(members) == 0:
		fail(At(name), "a group needs at least one member")
		return ccond{}, false
	case len(members) > MaxGroupMembers:
		fail(At(name), "%d members, more than the limit of %d", len(members), MaxGroupMembers)
		return ccond{}, false
	}
	out := ccond{op: cop}
	ok := true
	for i := range members {
		sub, subOK := k.conditionTree(d, ri, rid, ci, append(slices.Clip(base), At(name).Index(i)...), &members[i], depth+1)
		ok = ok && subOK
		out.sub = append(out.sub, sub)
	}
	return out, ok
}

// usesRegex tells whether evaluating cc may run a regex (the budget is
// checked after such rules).
func (cc *ccond) usesRegex() bool {
	if cc.op == opMatches {
		return true
	}
	for i := range cc.sub {
		if cc.sub[i].usesRegex() {
			return true
		}
	}
	return false
}

// condition compiles one test; ok=false when it has a problem (then
// reported through d and left out of the rule). base is where it is in
// condition ci (nil: it is condition ci).
func (k *compiler) condition(d *diagnoser, ri int, rid string, ci int, base Location, c *Condition) (ccond, bool) {
	ok := true
	fail := func(at Location, format string, args ...any) {
		d.condf(ri, rid, ci, append(slices.Clip(base), at...), format, args...)
		ok = false
	}
	if _, err := request.ParsePath(c.Field); err != nil {
		fail(At("field"), "%v", err)
	}
	spec, known := operatorSpecs[c.Operator]
	if !known {
		fail(At("operator"), "unknown operator %q (want one of %v)", c.Operator, Operators)
		return ccond{}, false
	}
	cc := ccond{op: spec.op}
	if len(c.Value) > 0 && c.Values != nil {
		fail(At("values"), "set value or values, not both")
		return cc, false
	}
	if c.CastToNumber {
		checkCastOperand(c, spec, &cc, fail)
		return cc, ok
	}
	operandChecks[spec.kind](k, c, spec, &cc, fail)
	return cc, ok
}

func checkNoOperand(_ *compiler, c *Condition, _ operatorSpec, _ *ccond, fail failFunc) {
	switch {
	case len(c.Value) > 0:
		fail(At("value"), "operator %s takes no value", c.Operator)
	case c.Values != nil:
		fail(At("values"), "operator %s takes no value (a values list is for in and not_in)", c.Operator)
	}
}

// checkListOperand reads values, or value as a one-item list; many values
// become a set.
func checkListOperand(_ *compiler, c *Condition, _ operatorSpec, cc *ccond, fail failFunc) {
	var members []string
	eachListOperand(c, fail, func(at Location, s jsonvalue.Scalar) {
		if !s.IsScalar() {
			fail(at, "must be a string, number or boolean, not %s", s.Kind)
			return
		}
		members = append(members, s.Str)
	})
	cc.members = stringset.New(members)
}

// eachListOperand calls f on each of in's and not_in's values (value as a
// one-item list) that is JSON, with its location; it reports a missing or
// too long list and values that are not JSON.
func eachListOperand(c *Condition, fail failFunc, f func(at Location, s jsonvalue.Scalar)) {
	raws, field := c.Values, At("values")
	if len(c.Value) > 0 {
		raws, field = []json.RawMessage{c.Value}, At("value")
	}
	switch {
	case len(raws) == 0:
		fail(field, "operator %s needs values (a list) or value", c.Operator)
		return
	case len(raws) > MaxValuesPerList:
		fail(field, "%d values, more than the limit of %d", len(raws), MaxValuesPerList)
		return
	}
	for i, raw := range raws {
		at := field
		if len(c.Value) == 0 {
			at = field.Index(i)
		}
		s, err := jsonvalue.ParseScalar(raw)
		if err != nil {
			fail(at, "not valid JSON: %v", err)
			continue
		}
		f(at, s)
	}
}

// singleOperand reads the one value the scalar, string and number operators
// take; ok=false when it is missing, a list, or not JSON.
func singleOperand(c *Condition, cc *ccond, fail failFunc) bool {
	if c.Values != nil {
		fail(At("values"), "operator %s takes a single value, not a list", c.Operator)
		return false
	}
	if len(c.Value) == 0 {
		fail(At("value"), "operator %s needs a value", c.Operator)
		return false
	}
	s, err := jsonvalue.ParseScalar(c.Value)
	if err != nil {
		fail(At("value"), "not valid JSON: %v", err)
		return false
	}
	cc.value = s
	return true
}

func checkScalarOperand(_ *compiler, c *Condition, _ operatorSpec, cc *ccond, fail failFunc) {
	if singleOperand(c, cc, fail) && !cc.value.IsScalar() {
		fail(At("value"), "operator %s needs a string, number or boolean, not %s", c.Operator, cc.value.Kind)
	}
}

func checkStringOperand(k *compiler, c *Condition, spec operatorSpec, cc *ccond, fail failFunc) {
	if !singleOperand(c, cc, fail) {
		return
	}
	if cc.value.Kind != jsonvalue.KindString {
		fail(At("value"), "operator %s needs a string value, not %s", c.Operator, cc.value.Kind)
		return
	}
	if spec.op != opMatches {
		return
	}
	m, err := k.pattern(cc.value.Str)
	if err != nil {
		fail(At("value"), "pattern %q does not compile: %v", jsonvalue.Truncate(cc.value.Str, 128), err)
		return
	}
	cc.matcher = m
}

func checkNumberOperand(_ *compiler, c *Condition, _ operatorSpec, cc *ccond, fail failFunc) {
	if singleOperand(c, cc, fail) && cc.value.Kind != jsonvalue.KindNumber {
		fail(At("value"), "operator %s needs a number value, not %s", c.Operator, cc.value.Kind)
	}
}
