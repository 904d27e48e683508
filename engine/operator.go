package engine

// op is a compiled operator.
type op uint8

const (
	opEq op = iota + 1
	opNeq
	opIn
	opNotIn
	opContains
	opNotContains
	opStartsWith
	opEndsWith
	opMatches
	opGt
	opGte
	opLt
	opLte
	opExists
	opNotExists
	opIsEmpty
	opIsNotEmpty
	opIsValidJSON
	opDetect
	// Groups, not in the operator table: a condition with any or all.
	// They come last: evaluation tells them apart with one comparison.
	opAny
	opAll
	// opOutput wraps a result rule's test of output.text or
	// output.structured: it holds when the output was truncated
	// (EvalOptions.OutputTruncated), else as its one member does. Call
	// rules never have it, so their evaluation pays nothing for it.
	opOutput
)

// operandKind is what an operator needs as its value.
type operandKind uint8

const (
	needsScalar    operandKind = iota // eq, neq: any JSON scalar
	needsList                         // in, not_in: values, or value as a one-item list
	needsString                       // string operators and matches
	needsNumber                       // gt, gte, lt, lte
	needsNothing                      // exists, is_empty, ...
	needsDetectors                    // detect: a detector name or a list of them
)

// opNameDetect is the detect operator's name.
const opNameDetect = "detect"

type operatorSpec struct {
	name string
	op   op
	kind operandKind
}

// operatorTable is the one list of operators, in documentation order:
// adding an operator is one row here (and its test in evaluation).
var operatorTable = []operatorSpec{
	{"eq", opEq, needsScalar},
	{"neq", opNeq, needsScalar},
	{"in", opIn, needsList},
	{"not_in", opNotIn, needsList},
	{"contains", opContains, needsString},
	{"not_contains", opNotContains, needsString},
	{"starts_with", opStartsWith, needsString},
	{"ends_with", opEndsWith, needsString},
	{"matches", opMatches, needsString},
	{"gt", opGt, needsNumber},
	{"gte", opGte, needsNumber},
	{"lt", opLt, needsNumber},
	{"lte", opLte, needsNumber},
	{"exists", opExists, needsNothing},
	{"not_exists", opNotExists, needsNothing},
	{"is_empty", opIsEmpty, needsNothing},
	{"is_not_empty", opIsNotEmpty, needsNothing},
	{"is_valid_json", opIsValidJSON, needsNothing},
	{opNameDetect, opDetect, needsDetectors},
}

// Operators lists every operator the engine understands, in documentation
// order. The CRD enum is kept in sync by a test.
var Operators = func() []string {
	names := make([]string, len(operatorTable))
	for i, s := range operatorTable {
		names[i] = s.name
	}
	return names
}()

var operatorSpecs = func() map[string]operatorSpec {
	m := make(map[string]operatorSpec, len(operatorTable))
	for _, s := range operatorTable {
		m[s.name] = s
	}
	return m
}()
