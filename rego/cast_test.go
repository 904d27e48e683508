package rego

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// TestRegoCastToNumber: a castToNumber condition is exported as a
// comparison of _cast (undefined for a field that is no number, so neq
// and not_in are false there too, never `not` of a helper), with its
// values read as the engine reads them. test/regodiff has OPA decide
// them against the engine.
func TestRegoCastToNumber(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		name string
		cond engine.Condition
		want string
	}{
		{"eq string", engine.Condition{Field: "kwargs.amount", Operator: "eq", Value: raw(`" +5e3 "`)}, "_cast(input.kwargs.amount) == 5000"},
		{"eq number", engine.Condition{Field: "kwargs.amount", Operator: "eq", Value: raw(`5000.0`)}, "_cast(input.kwargs.amount) == 5000"},
		{"neq", engine.Condition{Field: "kwargs.amount", Operator: "neq", Value: raw(`"-0.5"`)}, "_cast(input.kwargs.amount) != -0.5"},
		{"gt", engine.Condition{Field: "args.0", Operator: "gt", Value: raw(`"1e3"`)}, `_cast(_at(input.args, "0", 0)) > 1000`},
		{"gte", engine.Condition{Field: "kwargs.amount", Operator: "gte", Value: raw(`"\t1e21\n"`)}, "_cast(input.kwargs.amount) >= 1e+21"},
		{"lt", engine.Condition{Field: "kwargs.amount", Operator: "lt", Value: raw(`"+0.1"`)}, "_cast(input.kwargs.amount) < 0.1"},
		{"lte", engine.Condition{Field: "kwargs.amount", Operator: "lte", Value: raw(`-3`)}, "_cast(input.kwargs.amount) <= -3"},
		{"in", engine.Condition{Field: "kwargs.amount", Operator: "in", Values: []json.RawMessage{raw(`"5000"`), raw(`1e3`), raw(`" 7 "`)}},
			"_cast_in(_cast(input.kwargs.amount), [5000, 1000, 7])"},
		{"in value", engine.Condition{Field: "kwargs.amount", Operator: "in", Value: raw(`"+5"`)}, "_cast_in(_cast(input.kwargs.amount), [5])"},
		{"not_in", engine.Condition{Field: "kwargs.amount", Operator: "not_in", Values: []json.RawMessage{raw(`"5000"`)}},
			"_cast_not_in(_cast(input.kwargs.amount), [5000])"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cond.CastToNumber = true
			b := engine.Bundle{Policies: []engine.Policy{{ID: "p", Rules: []engine.Rule{{ID: "r", Effect: "deny",
				Conditions: []engine.Condition{tc.cond}}}}}}
			out, err := Export(b)
			if err != nil {
				t.Fatal(err)
			}
			src := string(out.Policy)
			if !strings.Contains(src, "\t"+tc.want+"\n") {
				t.Errorf("policy.rego lacks %q:\n%s", tc.want, src[:strings.Index(src, "# ----")])
			}
			if strings.Contains(src, "not _not_") {
				t.Error("a cast condition is exported through a negation, which would hold where the field is no number")
			}
		})
	}
	// What the engine refuses to compile is exported as the policy's
	// compile error, not as a rule.
	for _, c := range []engine.Condition{
		{Field: "kwargs.amount", Operator: "contains", Value: raw(`"5"`), CastToNumber: true},
		{Field: "kwargs.amount", Operator: "eq", Value: raw(`"0x10"`), CastToNumber: true},
		{Field: "kwargs.amount", Operator: "in", Values: []json.RawMessage{raw(`1`), raw(`"NaN"`)}, CastToNumber: true},
	} {
		b := engine.Bundle{Policies: []engine.Policy{{ID: "p", Rules: []engine.Rule{{ID: "r", Effect: "deny", Conditions: []engine.Condition{c}}}}}}
		out, err := Export(b)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out.Data), "castToNumber") || strings.Contains(string(out.Policy), "_cast(input") {
			t.Errorf("%s %s: data %s", c.Operator, c.Value, out.Data)
		}
	}
}
