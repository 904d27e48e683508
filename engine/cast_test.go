package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// castRequest holds the strings castToNumber reads and those it never does.
const castRequest = `{
  "tool_name": "pay",
  "kwargs": {
    "num": 5000, "str": "5000", "space": " 5000", "plus": "+5000", "sci": " 5e3 ", "tabs": "\t5000\n",
    "frac": "5000.0", "neg": "-2.5e-1", "tiny": "1e-400", "zero": "0", "negzero": "-0",
    "hex": "0x10", "inf": "inf", "infinity": "Infinity", "nan": "NaN", "under": "1_000", "empty": "",
    "blank": "   ", "huge": "1e400", "plusminus": "+-5", "plusspace": "+ 5", "twoplus": "++5", "lead0": "05",
    "dot": ".5", "trail": "5.", "words": "5000 dollars", "nbsp": "\u00a05000", "flag": true, "nul": null,
    "obj": {"a": 1}, "arr": [5000]
  }
}`

func castCase(field, op, value string, want bool) opCase {
	return opCase{field: "kwargs." + field, op: op, value: value, want: want}
}

// castCases are castToNumber conditions against castRequest.
var castCases = func() []opCase {
	var out []opCase
	// Every spelling of 5000 equals 5000, "5000" and " +5e3 ".
	for _, f := range []string{"num", "str", "space", "plus", "sci", "tabs", "frac"} {
		for _, v := range []string{`5000`, `"5000"`, `" +5e3 "`, `5000.0`} {
			out = append(out, castCase(f, "eq", v, true), castCase(f, "neq", v, false))
		}
		out = append(out, castCase(f, "gt", `4999.5`, true), castCase(f, "gte", `"5e3"`, true),
			castCase(f, "lt", `"5001"`, true), castCase(f, "lte", `4999`, false),
			castCase(f, "neq", `"5001"`, true), castCase(f, "eq", `5001`, false))
	}
	// What never parses makes every operator false, neq and not_in too.
	for _, f := range []string{"hex", "inf", "infinity", "nan", "under", "empty", "blank", "huge", "plusminus",
		"plusspace", "twoplus", "lead0", "dot", "trail", "words", "nbsp", "flag", "nul", "obj", "arr", "missing"} {
		for _, op := range []string{"eq", "neq", "gt", "gte", "lt", "lte"} {
			out = append(out, castCase(f, op, `0`, false))
		}
		out = append(out, opCase{field: "kwargs." + f, op: "in", values: []string{`0`, `16`, `5000`}, want: false},
			opCase{field: "kwargs." + f, op: "not_in", values: []string{`0`}, want: false})
	}
	out = append(out,
		castCase("neg", "eq", `-0.25`, true),
		castCase("neg", "lt", `"0"`, true),
		castCase("tiny", "eq", `0`, true), // underflow rounds to 0, as a JSON number does
		castCase("negzero", "eq", `0`, true),
		castCase("zero", "gte", `"-0"`, true),
		opCase{field: "kwargs.space", op: "in", values: []string{`1`, `"5e3"`}, want: true},
		opCase{field: "kwargs.sci", op: "in", value: `5000`, want: true},
		opCase{field: "kwargs.plus", op: "in", values: []string{`1`, `2`, `3`, `4`, `5`, `6`, `7`, `8`, `9`, `"5000.000"`}, want: true},
		opCase{field: "kwargs.plus", op: "not_in", values: []string{`1`, `" 2 "`}, want: true},
		opCase{field: "kwargs.num", op: "not_in", values: []string{`"5000"`}, want: false},
	)
	return out
}()

// TestOperatorsCastToNumber is castToNumber's table (its name puts its
// cases in the corpus OPA decides in test/regodiff).
func TestOperatorsCastToNumber(t *testing.T) {
	t.Parallel()
	req := decodedRequest(t, castRequest)
	for _, tc := range castCases {
		t.Run(tc.name(), func(t *testing.T) {
			t.Parallel()
			c := tc.condition()
			c.CastToNumber = true
			if got := condHolds(t, c, req); got != tc.want {
				t.Errorf("held = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOperatorsCastToNumberOff: without castToNumber the same conditions
// keep today's meaning (" 5000" is no number, "5000" is not 5000 to eq).
func TestOperatorsCastToNumberOff(t *testing.T) {
	t.Parallel()
	req := decodedRequest(t, castRequest)
	for _, tc := range []opCase{
		castCase("str", "eq", `5000`, false),
		castCase("str", "gt", `4999`, true),
		castCase("space", "gt", `4999`, false),
		castCase("plus", "gte", `0`, false),
		castCase("sci", "lt", `1e9`, false),
		castCase("hex", "neq", `0`, true),
		castCase("missing", "neq", `0`, true),
		{field: "kwargs.num", op: "in", values: []string{`"5000"`}, want: true},
		{field: "kwargs.plus", op: "in", values: []string{`5000`}, want: false},
	} {
		t.Run(tc.name(), func(t *testing.T) {
			t.Parallel()
			if got := condHolds(t, tc.condition(), req); got != tc.want {
				t.Errorf("held = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCastToNumberProblems: castToNumber on another operator, on a group,
// or with a value that is no number is a compile error at its location.
func TestCastToNumberProblems(t *testing.T) {
	t.Parallel()
	leaf := func(op string, value json.RawMessage, values ...json.RawMessage) Condition {
		return Condition{Field: "kwargs.amount", Operator: op, Value: value, Values: values, CastToNumber: true}
	}
	for _, tc := range []struct {
		name  string
		cond  Condition
		field string
		msg   string
	}{
		{"contains", leaf("contains", raw("5")), "spec.rules[0].conditions[0].castToNumber", "castToNumber applies only to eq, neq, in, not_in, gt, gte, lt and lte, not contains"},
		{"matches", leaf("matches", raw("5")), "spec.rules[0].conditions[0].castToNumber", "not matches"},
		{"exists", leaf("exists", nil), "spec.rules[0].conditions[0].castToNumber", "not exists"},
		{"is_valid_json", leaf("is_valid_json", nil), "spec.rules[0].conditions[0].castToNumber", "not is_valid_json"},
		{"word", leaf("eq", raw("abc")), "spec.rules[0].conditions[0].value", `castToNumber: "abc" is not a number`},
		{"hex", leaf("gt", raw("0x10")), "spec.rules[0].conditions[0].value", `castToNumber: "0x10" is not a number`},
		{"inf", leaf("lte", raw("inf")), "spec.rules[0].conditions[0].value", `"inf" is not a number`},
		{"empty", leaf("neq", raw("")), "spec.rules[0].conditions[0].value", `"" is not a number`},
		{"bool", leaf("eq", raw(true)), "spec.rules[0].conditions[0].value", "castToNumber: a boolean is not a number"},
		{"range", leaf("gte", raw("1e400")), "spec.rules[0].conditions[0].value", `"1e400" is not a number`},
		{"list", leaf("in", nil, raw(1), raw("NaN")), "spec.rules[0].conditions[0].values[1]", `castToNumber: "NaN" is not a number`},
		{"single", leaf("not_in", raw("1_000")), "spec.rules[0].conditions[0].value", `"1_000" is not a number`},
		{"no value", leaf("gt", nil), "spec.rules[0].conditions[0].value", "operator gt needs a value"},
		{"group", Condition{Any: []Condition{leaf("eq", raw(1))}, CastToNumber: true}, "spec.rules[0].conditions[0].castToNumber", "castToNumber belongs on the group's tests"},
		{"in group", Condition{Any: []Condition{{All: []Condition{leaf("starts_with", raw("1"))}}}},
			"spec.rules[0].conditions[0].any[0].all[0].castToNumber", "not starts_with"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := Policy{ID: "p", Rules: []Rule{{ID: "r", Effect: "deny", Conditions: []Condition{tc.cond}}}}
			diags := CheckPolicy(p)
			if len(diags) != 1 {
				t.Fatalf("diagnostics %v, want one", diags)
			}
			if d := diags[0]; d.Field != tc.field || !strings.Contains(d.Message, tc.msg) {
				t.Errorf("diagnostic at %s: %q; want at %s: %q", d.Field, d.Message, tc.field, tc.msg)
			}
		})
	}
}

// TestCastToNumberTrace: explain says the condition casts and, when the
// field is no number, why.
func TestCastToNumberTrace(t *testing.T) {
	t.Parallel()
	req := decodedRequest(t, castRequest)
	for field, want := range map[string]string{
		"kwargs.plus":    "",
		"kwargs.num":     "",
		"kwargs.hex":     "castToNumber: the field is not a decimal number (hex, inf, NaN, underscores and empty strings never are)",
		"kwargs.huge":    "castToNumber: the field is out of the range of a 64-bit float",
		"kwargs.flag":    "castToNumber: the field is a boolean, not a number",
		"kwargs.obj":     "castToNumber: the field is an object, not a number",
		"kwargs.missing": "castToNumber: the field is missing",
	} {
		c := mustCompile(t, Bundle{Policies: []Policy{{ID: "p", Rules: []Rule{{ID: "r", Effect: "deny", Conditions: []Condition{
			{Any: []Condition{{Field: field, Operator: "neq", Value: raw(1), CastToNumber: true}}}}}}}}})
		res := c.Evaluate(req, EvalOptions{Explain: true})
		if len(res.Trace) != 1 || len(res.Trace[0].Conditions) != 1 || len(res.Trace[0].Conditions[0].Members) != 1 {
			t.Fatalf("%s: trace %+v", field, res.Trace)
		}
		tc := res.Trace[0].Conditions[0].Members[0]
		if !tc.CastToNumber || tc.Reason != want || tc.Held != (want == "") {
			t.Errorf("%s: traced castToNumber=%v held=%v reason %q, want reason %q", field, tc.CastToNumber, tc.Held, tc.Reason, want)
		}
		if doc := mustJSON(tc); want != "" && !strings.Contains(doc, `"castToNumber":true,"reason":`) {
			t.Errorf("%s: trace JSON %s", field, doc)
		}
	}
}

// TestCastToNumberSchemaVersion: a bundle using castToNumber anywhere is
// version 6; one without keeps the version it had.
func TestCastToNumberSchemaVersion(t *testing.T) {
	t.Parallel()
	cast := Condition{Field: "kwargs.amount", Operator: "gt", Value: raw("5e3"), CastToNumber: true}
	for name, conds := range map[string][]Condition{
		"top":   {cast},
		"any":   {{Any: []Condition{cast}}},
		"all":   {{Any: []Condition{{All: []Condition{cast}}}}},
		"later": {{Field: "tool_name", Operator: "eq", Value: raw("pay")}, cast},
	} {
		b := Bundle{Policies: []Policy{{ID: "p", Rules: []Rule{{ID: "r", Effect: "deny", Conditions: conds}}}}}
		if got := b.NeededSchemaVersion(); got != SchemaVersionResults {
			t.Errorf("%s: version %d, want %d", name, got, SchemaVersionResults)
		}
		doc, _, err := Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !back.usesResults() {
			t.Errorf("%s: castToNumber lost in the round trip: %s", name, doc)
		}
	}
	cast.CastToNumber = false
	b := Bundle{Policies: []Policy{{ID: "p", Rules: []Rule{{ID: "r", Effect: "deny", Conditions: []Condition{cast}}}}}}
	if got := b.NeededSchemaVersion(); got != SchemaVersionOrdered {
		t.Errorf("without castToNumber: version %d, want %d", got, SchemaVersionOrdered)
	}
}

// TestCastToNumberToolIndex: a cast condition on tool_name does not index
// the rule by its value's spelling (a cast eq 5 matches " 5" too).
func TestCastToNumberToolIndex(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, Bundle{Policies: []Policy{{ID: "p", Rules: []Rule{{ID: "r", Effect: "deny", Conditions: []Condition{
		{Field: "tool_name", Operator: "eq", Value: raw("5"), CastToNumber: true}}}}}}})
	for _, tool := range []string{"5", " 5", "+5", "5e0"} {
		if res := c.Evaluate(Request{"tool_name": tool}, EvalOptions{}); res.Decision != Deny {
			t.Errorf("tool %q: %s, want deny", tool, res.Decision)
		}
	}
}

func FuzzCastNumber(f *testing.F) {
	for _, s := range []string{"5000", " +5e3 ", "0x10", "1e400", "+-5", "\t1\n", "NaN", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := jsonvalue.CastNumber(s)
		want, wantOK := refCast(s)
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("jsonvalue.CastNumber(%q) = %v, %v; reference %v, %v", s, got, ok, want, wantOK)
		}
	})
}

// castBundle has n castToNumber rules on every tool, none of which holds
// for castBenchRequest: each reads its field as a number.
func castBundle(n int) Bundle {
	var rules []Rule
	ops := []string{"eq", "neq", "in", "not_in", "gt", "gte", "lt", "lte"}
	for i := range n {
		c := Condition{Field: "kwargs.amount", Operator: ops[i%len(ops)], CastToNumber: true}
		switch c.Operator {
		case "neq":
			c.Value = raw(" +5e3 ")
		case "in", "not_in":
			c.Values = []json.RawMessage{raw(fmt.Sprint(i)), raw(i + 1), raw("1e9")}
			if c.Operator == "not_in" {
				c.Values = append(c.Values, raw(5000))
			}
		case "gt", "gte":
			c.Value = raw(fmt.Sprintf("%d", 10000+i))
		case "lt", "lte":
			c.Value = raw(-i)
		default:
			c.Value = raw(fmt.Sprintf(" %de0", i))
		}
		if i%3 == 0 {
			c.Field = "kwargs.note"
		}
		rules = append(rules, Rule{ID: fmt.Sprintf("r%d", i), Effect: "deny", Conditions: []Condition{c}})
	}
	return Bundle{Policies: []Policy{{ID: "p", DefaultEffect: "allow", Rules: rules}}}
}

var castBenchRequest = Request{"tool_name": "pay", "kwargs": map[string]any{"amount": " +5e3 ", "note": 5000.0}}

// TestCastToNumberDoesNotAllocate: casting reads strings in place.
func TestCastToNumberDoesNotAllocate(t *testing.T) {
	c := mustCompile(t, castBundle(100))
	if res := c.Evaluate(castBenchRequest, EvalOptions{}); res.Decision != Allow {
		t.Fatalf("decision %+v", res)
	}
	if n := testing.AllocsPerRun(100, func() { c.Evaluate(castBenchRequest, EvalOptions{}) }); n != 0 {
		t.Errorf("Evaluate allocates %v times per call", n)
	}
}

// TestCastToNumberExplanation: a result rule's explanation of a cast
// condition on a field that is no number says why, never the value.
func TestCastToNumberExplanation(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, Bundle{Policies: []Policy{{ID: "p", Rules: []Rule{{ID: "big", Effect: "deny", Phase: PhaseResult,
		Conditions: []Condition{{Field: "output.structured.rows", Operator: "gt", Value: raw("1e3"), CastToNumber: true}}}}}}})
	for rows, want := range map[string]string{
		`"0x10"`:   "condition 1: output.structured.rows gt does not hold: castToNumber: the field is not a decimal number (hex, inf, NaN, underscores and empty strings never are)",
		`true`:     "condition 1: output.structured.rows gt does not hold: castToNumber: the field is a boolean, not a number",
		`" +5e3 "`: "",
	} {
		req := decodedRequest(t, `{"tool_name":"q","output":{"structured":{"rows":`+rows+`}}}`)
		res := c.Evaluate(req, EvalOptions{Phase: PhaseResult})
		if len(res.Explanations) != 1 {
			t.Fatalf("%s: explanations %+v", rows, res.Explanations)
		}
		x := res.Explanations[0]
		if want == "" {
			if !x.Passed || res.Decision != Deny {
				t.Errorf("%s: %+v, decision %s", rows, x, res.Decision)
			}
			continue
		}
		if x.Passed || x.Sentence != want || strings.Contains(x.Sentence, strings.Trim(rows, `"`)) {
			t.Errorf("%s: explanation %q, want %q", rows, x.Sentence, want)
		}
	}
}
