package engine

import (
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// castToNumber's vocabulary (issue 28): request strings it reads (spaces,
// '+', exponents) and those it never does, and condition values, numeric
// and not.
var (
	genCastStrings = []string{" 5000", "+5000", " 5e3 ", "\t1000\n", "5000", "1e3", "+1e3", "-0", "5000.0", "999",
		"0x10", "inf", "Infinity", "NaN", "1_000", "", " ", "1e400", "+-5", "+", "05", ".5", "5.", "\u00a05000", "1e-400"}
	genCastValues    = []string{`5000`, `"5000"`, `" +5e3 "`, `1000`, `"1e3"`, `0`, `"-0"`, `"5.0e3"`, `"\t999\n"`, `1.5`, `"+1000"`, `5e3`, `"1000"`}
	genCastBadValues = []string{`"abc"`, `"0x10"`, `"NaN"`, `""`, `true`, `"1e400"`, `"inf"`, `"1_000"`}
)

// castify marks some of conds castToNumber, giving those a numeric value
// (rarely one that is not, or castToNumber on an operator or a group that
// may not have it: compile errors). An exhausted source marks none, so
// short inputs keep the cases they made before.
func (g *genSource) castify(conds []Condition) {
	for i := range conds {
		c := &conds[i]
		if c.Any != nil || c.All != nil {
			g.castify(c.Any)
			g.castify(c.All)
			if g.rare(200) {
				c.CastToNumber = true
			}
			continue
		}
		spec, known := operatorSpecs[c.Operator]
		if !known || !castOperators[spec.op] {
			c.CastToNumber = g.rare(64)
			continue
		}
		if g.intn(3) != 1 {
			continue
		}
		c.CastToNumber = true
		if g.intn(3) != 0 { // where castStrings puts numbers
			c.Field = pickFrom(g, "kwargs.amount", "kwargs.amount", "kwargs.note", "input.command", "args.0")
		}
		value := func() json.RawMessage {
			if g.rare(24) {
				return json.RawMessage(pickFrom(g, genCastBadValues...))
			}
			return json.RawMessage(pickFrom(g, genCastValues...))
		}
		switch {
		case g.rare(16): // keep what it had
		case spec.kind == needsList && len(c.Value) == 0:
			c.Values = c.Values[:0]
			for range 1 + g.intn(3) {
				c.Values = append(c.Values, value())
			}
		default:
			c.Value = value()
		}
	}
}

// castifyBundle runs castify over every rule of b.
func (g *genSource) castifyBundle(b *Bundle) {
	for pi := range b.Policies {
		for ri := range b.Policies[pi].Rules {
			g.castify(b.Policies[pi].Rules[ri].Conditions)
		}
	}
}

// castStrings puts castToNumber's strings where conditions look: the
// numeric fields of a request, when they exist.
func (g *genSource) castStrings(req map[string]any) {
	if kw, ok := req["kwargs"].(map[string]any); ok {
		for _, k := range []string{"amount", "note"} {
			if g.intn(2) == 0 {
				kw[k] = pickFrom(g, genCastStrings...)
			}
		}
	}
	if in, ok := req["input"].(map[string]any); ok && g.intn(3) == 0 {
		in["command"] = pickFrom(g, genCastStrings...)
	}
	if args, ok := req["args"].([]any); ok && len(args) > 0 && g.intn(3) == 0 {
		args[0] = pickFrom(g, genCastStrings...)
	}
	if g.rare(8) {
		req["tool_name"] = pickFrom(g, genCastStrings...)
	}
}

// TestGeneratedCastCoverage: the differential generators make castToNumber
// conditions that hold, that fail on a number, that fail on a string that
// never parses, and that do not compile, often enough for agreement to
// mean something.
func TestGeneratedCastCoverage(t *testing.T) {
	t.Parallel()
	counts := map[string]int{}
	var walk func(conds []Condition, reqs []map[string]any)
	walk = func(conds []Condition, reqs []map[string]any) {
		for _, c := range conds {
			walk(c.Any, reqs)
			walk(c.All, reqs)
			if !c.CastToNumber || c.Any != nil || c.All != nil {
				continue
			}
			if len(refConditionProblems(c)) > 0 {
				counts["invalid"]++
				continue
			}
			for _, req := range reqs {
				v, present := refResolve(req, c.Field)
				_, isNumber := refCastValue(v)
				s, isString := v.(string)
				switch {
				case present && refHolds(c, req):
					counts["held/"+c.Operator]++
					if isString && s != Stringify(v) || isString && !jsonvalue.IsJSONNumber(s) {
						counts["held/cast string"]++
					}
				case isNumber:
					counts["number, false"]++
				case isString:
					counts["no number: "+c.Operator]++
				}
			}
		}
	}
	for _, data := range differentialInputs(3000) {
		b, reqs := generatedCase(data)
		for _, p := range b.Policies {
			for _, r := range p.Rules {
				walk(r.Conditions, reqs)
			}
		}
	}
	for _, data := range gatewayInputs(3000) {
		b, reqs, _, _ := generatedGatewayCase(data)
		for _, p := range b.Policies {
			for _, r := range p.Rules {
				walk(r.Conditions, reqs)
			}
		}
	}
	t.Logf("castToNumber conditions over the generated cases: %v", counts)
	for _, k := range []string{"invalid", "held/cast string", "number, false", "held/eq", "held/neq", "held/in", "held/not_in",
		"held/gt", "held/lte", "no number: neq", "no number: not_in", "no number: eq"} {
		if counts[k] < 40 {
			t.Errorf("%s happened %d times: %v", k, counts[k], counts)
		}
	}
}
