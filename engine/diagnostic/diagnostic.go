// Package diagnostic says why a policy does not compile: a Diagnostic
// names the policy, rule and condition, and where in the resource the
// problem is (a Location, which the webhook turns into a field.Path). The
// engine's compile step and its linter (engine/lint) write them; engine
// names each of them too.
package diagnostic

import (
	"fmt"
	"slices"
	"strings"
)

// Diagnostic is one reason a policy does not compile. It names the policy, the
// rule (by index and id) and the condition, and where in the resource the
// problem is: Location step by step, for the Kubernetes side to build a
// field.Path from, and Field, the same as text in the resource's own terms
// (spec.rules[2].conditions[0].value), for people and the CLI.
type Diagnostic struct {
	PolicyID string `json:"policyId"`
	// PolicyKind is engine.KindClusterPolicy for a ClusterPolicy's problem, ""
	// for a Policy's: a Policy and a ClusterPolicy may share a name.
	PolicyKind     string   `json:"policyKind,omitempty"`
	RuleIndex      int      `json:"ruleIndex"` // -1: the policy itself
	RuleID         string   `json:"ruleId,omitempty"`
	ConditionIndex int      `json:"conditionIndex"` // -1: the rule itself
	Field          string   `json:"field"`
	Location       Location `json:"-"`
	Message        string   `json:"message"`
}

// Location is a path into a resource from its root: field names, and
// indexes into lists.
type Location []Step

// Step is one field name, or (Name == "") one list index.
type Step struct {
	Name  string
	Index int
}

// At returns the location of a field given by its names from the root.
func At(names ...string) Location {
	l := make(Location, len(names))
	for i, n := range names {
		l[i] = Step{Name: n}
	}
	return l
}

// Child returns l followed by the field name.
func (l Location) Child(name string) Location {
	return append(slices.Clip(l), Step{Name: name})
}

// Index returns l followed by a list index.
func (l Location) Index(i int) Location {
	return append(slices.Clip(l), Step{Index: i})
}

// String writes l as Kubernetes field paths read: spec.rules[2].value.
func (l Location) String() string {
	var b strings.Builder
	for i, s := range l {
		switch {
		case s.Name == "":
			fmt.Fprintf(&b, "[%d]", s.Index)
		case i > 0:
			b.WriteString(".")
			fallthrough
		default:
			b.WriteString(s.Name)
		}
	}
	return b.String()
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
