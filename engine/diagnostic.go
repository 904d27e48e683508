package engine

import (
	"fmt"
	"strings"
)

// Diagnostic is one reason a policy does not compile. It names the policy, the
// rule (by index and id) and the condition, and carries a field path in the
// resource's own terms (spec.rules[2].conditions[0].value) so the webhook and
// the CLI can point at the exact YAML line.
type Diagnostic struct {
	PolicyID       string `json:"policyId"`
	RuleIndex      int    `json:"ruleIndex"` // -1: the policy itself
	RuleID         string `json:"ruleId,omitempty"`
	ConditionIndex int    `json:"conditionIndex"` // -1: the rule itself
	Field          string `json:"field"`
	Message        string `json:"message"`
}

func (d Diagnostic) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy %q", d.PolicyID)
	if d.RuleIndex >= 0 {
		fmt.Fprintf(&b, ", rule %d", d.RuleIndex)
		if d.RuleID != "" {
			fmt.Fprintf(&b, " (%q)", d.RuleID)
		}
	}
	if d.ConditionIndex >= 0 {
		fmt.Fprintf(&b, ", condition %d", d.ConditionIndex)
	}
	fmt.Fprintf(&b, ": %s: %s", d.Field, d.Message)
	return b.String()
}

// Error makes a Diagnostic usable as an error.
func (d Diagnostic) Error() string { return d.String() }

// diagnoser collects diagnostics for one policy with its location filled in.
type diagnoser struct {
	policy string
	out    []Diagnostic
}

func (d *diagnoser) policyf(field, format string, args ...any) {
	d.out = append(d.out, Diagnostic{PolicyID: d.policy, RuleIndex: -1, ConditionIndex: -1,
		Field: field, Message: fmt.Sprintf(format, args...)})
}

func (d *diagnoser) rulef(ri int, rid, field, format string, args ...any) {
	d.out = append(d.out, Diagnostic{PolicyID: d.policy, RuleIndex: ri, RuleID: rid, ConditionIndex: -1,
		Field: fmt.Sprintf("spec.rules[%d].%s", ri, field), Message: fmt.Sprintf(format, args...)})
}

func (d *diagnoser) condf(ri int, rid string, ci int, field, format string, args ...any) {
	d.out = append(d.out, Diagnostic{PolicyID: d.policy, RuleIndex: ri, RuleID: rid, ConditionIndex: ci,
		Field: fmt.Sprintf("spec.rules[%d].conditions[%d].%s", ri, ci, field), Message: fmt.Sprintf(format, args...)})
}
