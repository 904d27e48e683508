package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/engine/internal/fold"
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// What evaluation says and compares, exported for ports of the engine to
// other evaluators (the Rego exporter), so that a port states exactly what
// the engine states rather than a copy of it.

// FoldKey is the canonical form of an agent id: FoldKey(a) == FoldKey(b)
// exactly when a freeze of a applies to b (Unicode simple folding, as
// strings.EqualFold).
func FoldKey(s string) string { return fold.Key(s) }

// SameAgent tells whether a freeze of frozenID applies to agentID: the one
// comparison the engine makes (Unicode simple folding, as strings.EqualFold),
// for tools that find or lift freezes outside an evaluation.
func SameAgent(frozenID, agentID string) bool { return fold.Key(frozenID) == fold.Key(agentID) }

// RuleReason is the reason a result decided by rule r of policy policyID
// gives: its description, or a sentence naming it; an allow gives none.
func RuleReason(policyID string, r *Rule) string { return ruleReason(policyID, r) }

// DefaultDenyReason is the reason of a deny by the first policy's
// defaultEffect.
func DefaultDenyReason(policyID string) string {
	return fmt.Sprintf("no rule matched and policy %q denies by default", policyID)
}

// CompileError is the reason of the POLICY_COMPILE_ERROR deny evaluation
// gives on reaching p, or "" when p compiles.
func CompileError(p Policy) string {
	return compileErrorOf(p.ID, CheckPolicy(p))
}

func compileErrorOf(id string, diags []Diagnostic) string {
	if len(diags) == 0 {
		return ""
	}
	return fmt.Sprintf("policy %q failed to compile: %s", id, diags[0].String())
}

// SelectToolPattern tells whether a select.tool value is a /regex/, and
// returns the pattern.
func SelectToolPattern(tool string) (string, bool) { return regexOf(tool) }

// RuleRanks is a tiered policy's evaluation order: rule i is the
// RuleRanks(rules)[i]-th evaluated, by priority (descending), then effect
// (deny, warn, audit, allow), then index. The first matching rule in this
// order decides.
func RuleRanks(rules []Rule) []int {
	order := make([]int, len(rules))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		a, b := &rules[x], &rules[y]
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return cmp.Compare(effectRank(Effect(b.Effect)), effectRank(Effect(a.Effect)))
	})
	rank := make([]int, len(order))
	for pos, i := range order {
		rank[i] = pos
	}
	return rank
}

// WindowSpan is a schedule window as evaluation reads it: the weekdays it
// starts on (in order from Sunday), from and to in seconds of the day (to
// before from crosses midnight), and its IANA zone.
type WindowSpan struct {
	Days     []time.Weekday
	From, To int
	Zone     string
}

// SpanOf reads w as compiling it does; ok is false when w does not compile.
func SpanOf(w Window) (span WindowSpan, ok bool) {
	cw, ok := readWindow(func(Location, string, ...any) {}, nil, &w)
	if !ok {
		return WindowSpan{}, false
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if cw.Days&(1<<d) != 0 {
			span.Days = append(span.Days, d)
		}
	}
	span.From, span.To, span.Zone = int(cw.From), int(cw.To), cw.Loc.String()
	return span, true
}

// RuleTools are the tools rule r is pinned to (its targets.tools, or its
// tool_name eq or in condition), as the tool index files it; nil when it
// reads every tool. For the linter (package engine/lint).
func RuleTools(r *Rule) []string { return toolKeys(r) }

// ScalarString is a condition value that is a JSON string, as the
// compiler reads it.
func ScalarString(raw json.RawMessage) (string, bool) {
	s, err := jsonvalue.ParseScalar(raw)
	return s.Str, err == nil && s.Kind == jsonvalue.KindString
}

// ScalarKey is a condition value's canonical form (equal values, such as
// 1 and 1.0, have equal keys), or raw itself when it is not a scalar.
func ScalarKey(raw json.RawMessage) string {
	s, err := jsonvalue.ParseScalar(raw)
	if err != nil {
		return string(raw)
	}
	return fmt.Sprintf("%d:%s", s.Kind, s.Str)
}
