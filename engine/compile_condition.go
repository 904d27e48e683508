package engine

import (
	"encoding/json"
)

// condFail reports one problem of the condition being compiled, at one of its
// fields (At("value"), At("values").Index(2)...).
type condFail func(at Location, format string, args ...any)

// operandCheck compiles a condition's value for one operand kind into cc and
// reports what is wrong with it. The operator table says which check runs.
type operandCheck func(k *compiler, c *Condition, spec operatorSpec, cc *ccond, fail condFail)

var operandChecks = map[operandKind]operandCheck{
	needsNothing: checkNoOperand,
	needsList:    checkListOperand,
	needsScalar:  checkScalarOperand,
	needsString:  checkStringOperand,
	needsNumber:  checkNumberOperand,
}

// condition compiles one condition; ok=false when it has a problem (then
// reported through d and left out of the rule).
func (k *compiler) condition(d *diagnoser, ri int, rid string, ci int, c *Condition) (ccond, bool) {
	ok := true
	fail := func(at Location, format string, args ...any) {
		d.condf(ri, rid, ci, at, format, args...)
		ok = false
	}
	if _, err := ParsePath(c.Field); err != nil {
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
	operandChecks[spec.kind](k, c, spec, &cc, fail)
	return cc, ok
}

func checkNoOperand(_ *compiler, c *Condition, _ operatorSpec, _ *ccond, fail condFail) {
	switch {
	case len(c.Value) > 0:
		fail(At("value"), "operator %s takes no value", c.Operator)
	case c.Values != nil:
		fail(At("values"), "operator %s takes no value (a values list is for in and not_in)", c.Operator)
	}
}

// checkListOperand reads values, or value as a one-item list; many values
// become a set.
func checkListOperand(_ *compiler, c *Condition, _ operatorSpec, cc *ccond, fail condFail) {
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
		s, err := parseScalar(raw)
		if err != nil {
			fail(at, "not valid JSON: %v", err)
			continue
		}
		if !s.isScalar() {
			fail(at, "must be a string, number or boolean, not %s", s.kind)
			continue
		}
		cc.list = append(cc.list, s.str)
	}
	if len(cc.list) > 8 {
		cc.set = make(map[string]struct{}, len(cc.list))
		for _, s := range cc.list {
			cc.set[s] = struct{}{}
		}
		cc.list = nil
	}
}

// singleOperand reads the one value the scalar, string and number operators
// take; ok=false when it is missing, a list, or not JSON.
func singleOperand(c *Condition, cc *ccond, fail condFail) bool {
	if c.Values != nil {
		fail(At("values"), "operator %s takes a single value, not a list", c.Operator)
		return false
	}
	if len(c.Value) == 0 {
		fail(At("value"), "operator %s needs a value", c.Operator)
		return false
	}
	s, err := parseScalar(c.Value)
	if err != nil {
		fail(At("value"), "not valid JSON: %v", err)
		return false
	}
	cc.value = s
	return true
}

func checkScalarOperand(_ *compiler, c *Condition, _ operatorSpec, cc *ccond, fail condFail) {
	if singleOperand(c, cc, fail) && !cc.value.isScalar() {
		fail(At("value"), "operator %s needs a string, number or boolean, not %s", c.Operator, cc.value.kind)
	}
}

func checkStringOperand(k *compiler, c *Condition, spec operatorSpec, cc *ccond, fail condFail) {
	if !singleOperand(c, cc, fail) {
		return
	}
	if cc.value.kind != kindString {
		fail(At("value"), "operator %s needs a string value, not %s", c.Operator, cc.value.kind)
		return
	}
	if spec.op != opMatches {
		return
	}
	m, err := k.pattern(cc.value.str)
	if err != nil {
		fail(At("value"), "pattern %q does not compile: %v", truncate(cc.value.str, 128), err)
		return
	}
	cc.matcher = m
}

func checkNumberOperand(_ *compiler, c *Condition, _ operatorSpec, cc *ccond, fail condFail) {
	if singleOperand(c, cc, fail) && cc.value.kind != kindNumber {
		fail(At("value"), "operator %s needs a number value, not %s", c.Operator, cc.value.kind)
	}
}
