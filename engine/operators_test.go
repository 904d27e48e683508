package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// operatorRequest is one request carrying every JSON type the operators must
// handle, decoded the way the sidecar decodes it.
const operatorRequest = `{
  "tool_name": "Bash",
  "agent_id": "agent-1",
  "input": {
    "command": "rm -rf /tmp/x",
    "empty": "",
    "space": " ",
    "nul": null,
    "obj": {"a": "x", "b": 2},
    "arr": [1, "two", true, null],
    "earr": [],
    "eobj": {},
    "json": "{\"a\":1}",
    "jsonnull": "null",
    "badjson": "{a:1}",
    "shell": {"cmd": "a && b <c> d"}
  },
  "kwargs": {
    "amount": 5000, "amountf": 5000.0, "half": 1.5, "neg": -3, "zero": 0, "tenth": 0.1,
    "str": "1000", "sci": "1e3", "hex": "0x10", "inf": "inf", "infinity": "Infinity",
    "nan": "NaN", "abc": "abc", "flag": true, "off": false, "zerostr": "0",
    "plus": "+5", "dot": ".5", "lead0": "05", "negstr": "-2.5e-1"
  },
  "args": ["first", {"x": "nested", "y": [10, 20]}, 3],
  "numkeys": {"0": "zero"}
}`

func decodedRequest(tb testing.TB, doc string) Request {
	tb.Helper()
	req, err := DecodeRequest([]byte(doc))
	if err != nil {
		tb.Fatalf("DecodeRequest: %v", err)
	}
	return req
}

// opCase is one condition against operatorRequest. value and values are raw
// JSON so that cases can spell 5000.0 and 5e3 exactly.
type opCase struct {
	field  string
	op     string
	value  string   // "" = unset
	values []string // nil = unset
	want   bool
}

func (c opCase) condition() Condition {
	cond := Condition{Field: c.field, Operator: c.op}
	if c.value != "" {
		cond.Value = json.RawMessage(c.value)
	}
	for _, v := range c.values {
		cond.Values = append(cond.Values, json.RawMessage(v))
	}
	return cond
}

func (c opCase) name() string {
	s := c.field + " " + c.op
	if c.value != "" {
		s += " " + c.value
	}
	if c.values != nil {
		s += " [" + strings.Join(c.values, ",") + "]"
	}
	return s
}

var operatorCases = []opCase{
	// detect: the named detectors in the field's string (TestDetectOperator
	// has the matches).
	{field: "input.command", op: "detect", value: `"aws_access_key"`, want: false},
	{field: "kwargs.amount", op: "detect", values: []string{`"jwt"`, `"email"`, `"credit_card"`}, want: false},
	// eq / neq: strict, type-aware; numbers numerically, never equal to strings.
	{field: "kwargs.amount", op: "eq", value: `5000`, want: true},
	{field: "kwargs.amount", op: "eq", value: `5000.0`, want: true},
	{field: "kwargs.amount", op: "eq", value: `5e3`, want: true},
	{field: "kwargs.amountf", op: "eq", value: `5000`, want: true},
	{field: "kwargs.amount", op: "eq", value: `"5000"`, want: false},
	{field: "kwargs.amount", op: "eq", value: `4999`, want: false},
	{field: "kwargs.str", op: "eq", value: `1000`, want: false},
	{field: "kwargs.str", op: "eq", value: `"1000"`, want: true},
	{field: "kwargs.flag", op: "eq", value: `true`, want: true},
	{field: "kwargs.flag", op: "eq", value: `"true"`, want: false},
	{field: "kwargs.flag", op: "eq", value: `1`, want: false},
	{field: "kwargs.off", op: "eq", value: `false`, want: true},
	{field: "kwargs.zero", op: "eq", value: `false`, want: false},
	{field: "tool_name", op: "eq", value: `"Bash"`, want: true},
	{field: "tool_name", op: "eq", value: `"bash"`, want: false},
	{field: "input.obj", op: "eq", value: `"{\"a\":\"x\",\"b\":2}"`, want: false},
	{field: "input.nul", op: "eq", value: `"null"`, want: false},
	{field: "input.empty", op: "eq", value: `""`, want: true},
	{field: "input.nope", op: "eq", value: `"x"`, want: false},
	{field: "kwargs.amount", op: "neq", value: `5000`, want: false},
	{field: "kwargs.amount", op: "neq", value: `5000.0`, want: false},
	{field: "kwargs.amount", op: "neq", value: `"5000"`, want: true},
	{field: "kwargs.flag", op: "neq", value: `true`, want: false},
	{field: "kwargs.flag", op: "neq", value: `false`, want: true},
	{field: "input.nul", op: "neq", value: `"x"`, want: true},
	{field: "input.obj", op: "neq", value: `"x"`, want: true},
	{field: "input.nope", op: "neq", value: `"x"`, want: true},

	// in / not_in: both sides stringified; a scalar value is a one-item list.
	{field: "kwargs.amount", op: "in", values: []string{`"5000"`}, want: true},
	{field: "kwargs.amount", op: "in", values: []string{`5000`}, want: true},
	{field: "kwargs.amount", op: "in", values: []string{`5000.0`}, want: true},
	{field: "kwargs.amount", op: "in", values: []string{`"5000.0"`}, want: false},
	{field: "kwargs.str", op: "in", values: []string{`1`, `1000`}, want: true},
	{field: "kwargs.half", op: "in", values: []string{`"1.5"`}, want: true},
	{field: "kwargs.flag", op: "in", values: []string{`"true"`}, want: true},
	{field: "kwargs.flag", op: "in", values: []string{`true`}, want: true},
	{field: "kwargs.off", op: "in", values: []string{`true`}, want: false},
	{field: "input.nul", op: "in", values: []string{`"null"`}, want: true},
	{field: "input.obj", op: "in", values: []string{`"{\"a\":\"x\",\"b\":2}"`}, want: true},
	{field: "input.arr", op: "in", values: []string{`"[1,\"two\",true,null]"`}, want: true},
	{field: "args.1.y", op: "in", values: []string{`"[10,20]"`}, want: true},
	{field: "tool_name", op: "in", value: `"Bash"`, want: true},
	{field: "tool_name", op: "in", value: `"Edit"`, want: false},
	{field: "tool_name", op: "in", values: []string{`"bash"`, `"sh"`}, want: false},
	{field: "tool_name", op: "in", values: manyValues(`"Bash"`), want: true},
	{field: "tool_name", op: "in", values: manyValues(`"Edit"`), want: false},
	{field: "input.nope", op: "in", values: []string{`"x"`}, want: false},
	{field: "kwargs.amount", op: "not_in", values: []string{`"5000"`}, want: false},
	{field: "kwargs.amount", op: "not_in", values: []string{`"5000.0"`}, want: true},
	{field: "tool_name", op: "not_in", value: `"Bash"`, want: false},
	{field: "tool_name", op: "not_in", values: manyValues(`"Bash"`), want: false},
	{field: "tool_name", op: "not_in", values: manyValues(`"Edit"`), want: true},
	{field: "input.nope", op: "not_in", values: []string{`"x"`}, want: true},

	// contains family: the field stringified.
	{field: "input.command", op: "contains", value: `"rm -rf"`, want: true},
	{field: "input.command", op: "contains", value: `"RM"`, want: false},
	{field: "input.empty", op: "contains", value: `""`, want: true},
	{field: "kwargs.amount", op: "contains", value: `"50"`, want: true},
	{field: "kwargs.amount", op: "contains", value: `"."`, want: false},
	{field: "kwargs.half", op: "contains", value: `"."`, want: true},
	{field: "kwargs.flag", op: "contains", value: `"ru"`, want: true},
	{field: "input.nul", op: "contains", value: `"nul"`, want: true},
	{field: "input.obj", op: "contains", value: `"\"a\":\"x\""`, want: true},
	{field: "input.arr", op: "contains", value: `"\"two\""`, want: true},
	{field: "input.shell", op: "contains", value: `"&&"`, want: true},
	{field: "input.shell", op: "contains", value: `"<c>"`, want: true},
	{field: "input", op: "contains", value: `"rm -rf"`, want: true},
	{field: "input.nope", op: "contains", value: `""`, want: false},
	{field: "input.command", op: "not_contains", value: `"rm -rf"`, want: false},
	{field: "input.command", op: "not_contains", value: `"sudo"`, want: true},
	{field: "kwargs.amount", op: "not_contains", value: `"50"`, want: false},
	{field: "input.shell", op: "not_contains", value: `"&&"`, want: false},
	{field: "input.nope", op: "not_contains", value: `"x"`, want: true},
	{field: "input.command", op: "starts_with", value: `"rm "`, want: true},
	{field: "input.command", op: "starts_with", value: `"-rf"`, want: false},
	{field: "kwargs.amount", op: "starts_with", value: `"5"`, want: true},
	{field: "kwargs.amountf", op: "starts_with", value: `"5000."`, want: false},
	{field: "input.obj", op: "starts_with", value: `"{\"a\""`, want: true},
	{field: "input.nope", op: "starts_with", value: `""`, want: false},
	{field: "input.command", op: "ends_with", value: `"/tmp/x"`, want: true},
	{field: "input.command", op: "ends_with", value: `"rm"`, want: false},
	{field: "kwargs.half", op: "ends_with", value: `".5"`, want: true},
	{field: "kwargs.amountf", op: "ends_with", value: `".0"`, want: false},
	{field: "input.arr", op: "ends_with", value: `"null]"`, want: true},
	{field: "input.nope", op: "ends_with", value: `""`, want: false},

	// matches: re2 over the stringified field; literal patterns too, since
	// the engine takes a fast path for them.
	{field: "input.command", op: "matches", value: `"^rm\\s+-rf\\b"`, want: true},
	{field: "input.command", op: "matches", value: `"^sudo"`, want: false},
	{field: "input.command", op: "matches", value: `"rm"`, want: true},
	{field: "input.command", op: "matches", value: `"^rm"`, want: true},
	{field: "input.command", op: "matches", value: `"^-rf"`, want: false},
	{field: "input.command", op: "matches", value: `"tmp/x$"`, want: true},
	{field: "input.command", op: "matches", value: `"tmp$"`, want: false},
	{field: "input.command", op: "matches", value: `"^rm -rf /tmp/x$"`, want: true},
	{field: "input.command", op: "matches", value: `"^rm -rf$"`, want: false},
	{field: "input.command", op: "matches", value: `"(?i)RM -RF"`, want: true},
	{field: "kwargs.amount", op: "matches", value: `"^[1-9][0-9]{3,}$"`, want: true},
	{field: "kwargs.amountf", op: "matches", value: `"^5000$"`, want: true},
	{field: "kwargs.half", op: "matches", value: `"^1\\.5$"`, want: true},
	{field: "kwargs.flag", op: "matches", value: `"^true$"`, want: true},
	{field: "input.nul", op: "matches", value: `"^null$"`, want: true},
	{field: "input.obj", op: "matches", value: `"^\\{\"a\":\"x\",\"b\":2\\}$"`, want: true},
	{field: "input.empty", op: "matches", value: `"^$"`, want: true},
	{field: "input.nope", op: "matches", value: `".*"`, want: false},
	{field: "input.nope", op: "matches", value: `""`, want: false},

	// gt / gte / lt / lte: numbers and strings that are numbers; anything
	// else is false in both directions.
	{field: "kwargs.amount", op: "gt", value: `999`, want: true},
	{field: "kwargs.amount", op: "gt", value: `5000`, want: false},
	{field: "kwargs.amount", op: "gte", value: `5000`, want: true},
	{field: "kwargs.amount", op: "gte", value: `5000.5`, want: false},
	{field: "kwargs.amount", op: "lt", value: `5001`, want: true},
	{field: "kwargs.amount", op: "lt", value: `5000`, want: false},
	{field: "kwargs.amount", op: "lte", value: `5000`, want: true},
	{field: "kwargs.amount", op: "lte", value: `4999.99`, want: false},
	{field: "kwargs.half", op: "gt", value: `1`, want: true},
	{field: "kwargs.half", op: "lt", value: `2`, want: true},
	{field: "kwargs.neg", op: "lt", value: `0`, want: true},
	{field: "kwargs.zero", op: "gte", value: `0`, want: true},
	{field: "kwargs.zero", op: "lte", value: `-0.0`, want: true},
	{field: "kwargs.tenth", op: "gt", value: `0.09999`, want: true},
	{field: "kwargs.str", op: "gt", value: `999`, want: true},
	{field: "kwargs.str", op: "lte", value: `1000`, want: true},
	{field: "kwargs.str", op: "lt", value: `1000`, want: false},
	{field: "kwargs.sci", op: "gte", value: `1000`, want: true},
	{field: "kwargs.zerostr", op: "lt", value: `1`, want: true},
	{field: "kwargs.abc", op: "gt", value: `0`, want: false},
	{field: "kwargs.abc", op: "lt", value: `0`, want: false},
	{field: "kwargs.hex", op: "gt", value: `0`, want: false},
	{field: "kwargs.hex", op: "lte", value: `100`, want: false},
	{field: "kwargs.inf", op: "gt", value: `0`, want: false},
	{field: "kwargs.inf", op: "lt", value: `0`, want: false},
	{field: "kwargs.infinity", op: "gte", value: `0`, want: false},
	{field: "kwargs.nan", op: "gt", value: `0`, want: false},
	{field: "kwargs.nan", op: "lte", value: `0`, want: false},
	// Strings are numbers when they follow the JSON number grammar, the
	// one the request itself is written in.
	{field: "kwargs.plus", op: "gt", value: `0`, want: false},
	{field: "kwargs.dot", op: "gt", value: `0`, want: false},
	{field: "kwargs.lead0", op: "gt", value: `0`, want: false},
	{field: "kwargs.negstr", op: "lt", value: `0`, want: true},
	{field: "input.empty", op: "lte", value: `0`, want: false},
	{field: "kwargs.flag", op: "gt", value: `0`, want: false},
	{field: "kwargs.off", op: "lt", value: `1`, want: false},
	{field: "input.nul", op: "lt", value: `1`, want: false},
	{field: "input.nul", op: "gte", value: `-1`, want: false},
	{field: "input.arr", op: "gt", value: `0`, want: false},
	{field: "input.obj", op: "lt", value: `1`, want: false},
	{field: "input.nope", op: "gt", value: `0`, want: false},
	{field: "input.nope", op: "lte", value: `0`, want: false},

	// exists / not_exists: a present null is present.
	{field: "input.command", op: "exists", want: true},
	{field: "input.nul", op: "exists", want: true},
	{field: "input.empty", op: "exists", want: true},
	{field: "input.nope", op: "exists", want: false},
	{field: "tool_name.length", op: "exists", want: false},
	{field: "input.nul", op: "not_exists", want: false},
	{field: "input.nope", op: "not_exists", want: true},
	{field: "nothing.at.all", op: "not_exists", want: true},

	// is_empty / is_not_empty: missing, null, "", [] and {} are empty.
	{field: "input.nope", op: "is_empty", want: true},
	{field: "input.nul", op: "is_empty", want: true},
	{field: "input.empty", op: "is_empty", want: true},
	{field: "input.earr", op: "is_empty", want: true},
	{field: "input.eobj", op: "is_empty", want: true},
	{field: "input.space", op: "is_empty", want: false},
	{field: "kwargs.zero", op: "is_empty", want: false},
	{field: "kwargs.off", op: "is_empty", want: false},
	{field: "kwargs.zerostr", op: "is_empty", want: false},
	{field: "input.arr", op: "is_empty", want: false},
	{field: "input.obj", op: "is_empty", want: false},
	{field: "input.nope", op: "is_not_empty", want: false},
	{field: "input.nul", op: "is_not_empty", want: false},
	{field: "input.empty", op: "is_not_empty", want: false},
	{field: "input.earr", op: "is_not_empty", want: false},
	{field: "input.eobj", op: "is_not_empty", want: false},
	{field: "kwargs.zero", op: "is_not_empty", want: true},
	{field: "input.command", op: "is_not_empty", want: true},

	// is_valid_json: a string that parses as JSON.
	{field: "input.json", op: "is_valid_json", want: true},
	{field: "input.jsonnull", op: "is_valid_json", want: true},
	{field: "kwargs.str", op: "is_valid_json", want: true},
	{field: "input.badjson", op: "is_valid_json", want: false},
	{field: "input.command", op: "is_valid_json", want: false},
	{field: "input.empty", op: "is_valid_json", want: false},
	{field: "input.obj", op: "is_valid_json", want: false},
	{field: "kwargs.amount", op: "is_valid_json", want: false},
	{field: "input.nul", op: "is_valid_json", want: false},
	{field: "input.nope", op: "is_valid_json", want: false},

	// Field resolution: numeric segments index arrays.
	{field: "args.0", op: "eq", value: `"first"`, want: true},
	{field: "args.1.x", op: "eq", value: `"nested"`, want: true},
	{field: "args.1.y.1", op: "eq", value: `20`, want: true},
	{field: "args.2", op: "gt", value: `2`, want: true},
	{field: "input.arr.1", op: "eq", value: `"two"`, want: true},
	{field: "input.arr.3", op: "exists", want: true},
	{field: "args.3", op: "exists", want: false},
	{field: "args.-1", op: "exists", want: false},
	{field: "args.01", op: "exists", want: false}, // as in JavaScript: canonical indexes only
	{field: "args.x", op: "exists", want: false},
	{field: "args.0.x", op: "exists", want: false},
	{field: "args.1.y.2", op: "exists", want: false},
	{field: "numkeys.0", op: "eq", value: `"zero"`, want: true},
	{field: "args", op: "contains", value: `"\"x\":\"nested\""`, want: true},
}

// manyValues is a list long enough that the engine stores it as a set.
func manyValues(extra string) []string {
	out := []string{extra}
	for i := range 20 {
		out = append(out, strconv.Quote(fmt.Sprintf("tool-%d", i)))
	}
	return out
}

// condHolds compiles cond into the only rule of a deny policy and reports
// whether that rule matched, checking that the explain path agrees.
func condHolds(t *testing.T, cond Condition, req Request) bool {
	t.Helper()
	b := Bundle{Policies: []Policy{{ID: "p", Version: 1, DefaultEffect: "allow",
		Rules: []Rule{{ID: "r", Effect: "deny", Conditions: []Condition{cond}}}}}}
	record(t, b, req, t0, nil, nil)
	c := mustCompile(t, b)
	res := c.Evaluate(req, EvalOptions{})
	if res.Code != "" {
		t.Fatalf("unexpected code %s: %s", res.Code, res.Reason)
	}
	held := res.Decision == Deny
	if held && res.MatchedRuleID != "r" {
		t.Fatalf("deny without the rule: %+v", res)
	}
	explained := c.Evaluate(req, EvalOptions{Explain: true})
	if explained.Decision != res.Decision {
		t.Fatalf("explain changed the decision: %s vs %s", explained.Decision, res.Decision)
	}
	for _, tr := range explained.Trace {
		if len(tr.Conditions) != 1 || tr.Conditions[0].Held != held || tr.Matched != held {
			t.Fatalf("trace disagrees with the decision (held=%v): %+v", held, tr)
		}
	}
	return held
}

func TestOperators(t *testing.T) {
	t.Parallel()
	req := decodedRequest(t, operatorRequest)
	for _, tc := range operatorCases {
		t.Run(tc.name(), func(t *testing.T) {
			t.Parallel()
			if got := condHolds(t, tc.condition(), req); got != tc.want {
				t.Errorf("held = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOperatorTableCoversEveryOperator(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for _, tc := range operatorCases {
		seen[tc.op]++
	}
	for _, op := range Operators {
		if seen[op] < 2 {
			t.Errorf("operator %s has %d cases, want at least 2", op, seen[op])
		}
	}
	if len(Operators) != 19 {
		t.Errorf("the engine knows %d operators, the contract lists 19: %v", len(Operators), Operators)
	}
}

// TestOperatorsOnMissingFields is the "missing field" column of the
// contract's operator table, for three ways of being missing.
func TestOperatorsOnMissingFields(t *testing.T) {
	t.Parallel()
	req := decodedRequest(t, operatorRequest)
	missingTrue := map[string]bool{"neq": true, "not_in": true, "not_contains": true, "not_exists": true, "is_empty": true}
	values := map[string]string{
		"eq": `"x"`, "neq": `"x"`, "contains": `""`, "not_contains": `""`, "starts_with": `""`, "ends_with": `""`,
		"matches": `".*"`, "gt": `-1e300`, "gte": `-1e300`, "lt": `1e300`, "lte": `1e300`,
		"detect": `"email"`,
	}
	for _, field := range []string{"input.nope", "tool_name.x", "args.7", "absent"} {
		for _, op := range Operators {
			tc := opCase{field: field, op: op, value: values[op], want: missingTrue[op]}
			if op == "in" || op == "not_in" {
				tc.values = []string{`""`, `"null"`}
			}
			t.Run(tc.name(), func(t *testing.T) {
				t.Parallel()
				if got := condHolds(t, tc.condition(), req); got != tc.want {
					t.Errorf("held = %v, want %v", got, tc.want)
				}
			})
		}
	}
}

func TestStringify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"as-is \"quoted\"", "as-is \"quoted\""},
		{"", ""},
		{5000.0, "5000"},
		{1.5, "1.5"},
		{-3.0, "-3"},
		{0.0, "0"},
		{0.1, "0.1"},
		{123456789012.0, "123456789012"},
		{1e20, "100000000000000000000"},
		{true, "true"},
		{false, "false"},
		{nil, "null"},
		{[]any{}, "[]"},
		{map[string]any{}, "{}"},
		{[]any{1.0, "two", true, nil, 2.5}, `[1,"two",true,null,2.5]`},
		{map[string]any{"b": []any{5000.0}, "a": map[string]any{"c": nil}}, `{"a":{"c":null},"b":[5000]}`},
		{map[string]any{"q": "say \"hi\"\\"}, `{"q":"say \"hi\"\\"}`},
		// Compact JSON is the text itself: a policy that looks for "&&" or
		// "<" in an object must find it, not an HTML-safe \u0026 escape.
		{map[string]any{"cmd": "a && b <c> d"}, `{"cmd":"a && b <c> d"}`},
		{[]any{"x\u2028y"}, "[\"x\u2028y\"]"},
	} {
		t.Run(fmt.Sprintf("%T/%v", tc.in, tc.in), func(t *testing.T) {
			t.Parallel()
			if got := Stringify(tc.in); got != tc.want {
				t.Errorf("Stringify = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestStringifyNumbers checks the contract's number form on many values:
// it round-trips, it is shortest (no more significant digits than needed),
// and integers below 1e21 print without a fraction or exponent.
func TestStringifyNumbers(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	nums := []float64{5000, 1.5, -1.5, 0.1, 0.2 + 0.1, 1e-6, 1e-7, 123e-9, 1e21, 1e22, 9007199254740993,
		math.MaxFloat64, math.SmallestNonzeroFloat64, -1e-300, 999999999999999999999}
	for range 2000 {
		nums = append(nums, math.Float64frombits(rng.Uint64()), float64(rng.Int64N(1<<53)-1<<52), rng.NormFloat64()*1e6)
	}
	for _, f := range nums {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue // JSON has no such numbers
		}
		s := Stringify(f)
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != f {
			t.Errorf("Stringify(%v) = %q does not round-trip (%v, %v)", f, s, back, err)
			continue
		}
		if strings.HasSuffix(s, ".0") || strings.Contains(s, ".0e") {
			t.Errorf("Stringify(%v) = %q has a trailing .0", f, s)
		}
		if got, want := significantDigits(s), significantDigits(strconv.FormatFloat(f, 'e', -1, 64)); got != want {
			t.Errorf("Stringify(%v) = %q has %d significant digits, shortest is %d", f, s, got, want)
		}
		if f == math.Trunc(f) && math.Abs(f) < 1e21 && strings.ContainsAny(s, ".e") {
			t.Errorf("Stringify(%v) = %q: an integer below 1e21 prints as plain digits", f, s)
		}
	}
}

func significantDigits(s string) int {
	mant, _, _ := strings.Cut(strings.TrimPrefix(s, "-"), "e")
	digits := strings.Trim(strings.ReplaceAll(mant, ".", ""), "0")
	return len(digits)
}

// TestInUsesStringify: the in operator sees numbers exactly as Stringify
// prints them.
func TestInUsesStringify(t *testing.T) {
	t.Parallel()
	for _, f := range []float64{5000, 1.5, -0.25, 1e20, 1e21, 1.5e-7, 123456.789} {
		req := Request{"tool_name": "t", "n": f}
		cond := Condition{Field: "n", Operator: "in", Values: []json.RawMessage{raw(Stringify(f))}}
		if !condHolds(t, cond, req) {
			t.Errorf("%v in [%q] is false", f, Stringify(f))
		}
	}
}
