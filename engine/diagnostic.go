package engine

import (
	"fmt"

	"github.com/toolgate/toolgate/engine/diagnostic"
)

// Why a policy does not compile is package diagnostic's; engine names it
// too, as Compile and CheckPolicy return it.
type (
	// Diagnostic is one reason a policy does not compile.
	Diagnostic = diagnostic.Diagnostic
	// Location is a path into a resource from its root.
	Location = diagnostic.Location
	// Step is one field name, or (Name == "") one list index.
	Step = diagnostic.Step
)

// At returns the location of a field given by its names from the root.
func At(names ...string) Location { return diagnostic.At(names...) }

// failFunc reports one problem of what is being compiled (a rule, a
// condition) at a location relative to it: At("value"),
// At("when", "schedule").Index(2).
type failFunc func(at Location, format string, args ...any)

// diagnoser collects diagnostics for one policy with its location filled in.
type diagnoser struct {
	policy string
	kind   string
	out    []Diagnostic
}

func (d *diagnoser) add(ri int, rid string, ci int, at Location, format string, args []any) {
	d.out = append(d.out, Diagnostic{PolicyID: d.policy, PolicyKind: d.kind, RuleIndex: ri, RuleID: rid, ConditionIndex: ci,
		Field: at.String(), Location: at, Message: fmt.Sprintf(format, args...)})
}

// policyf reports a problem of the policy itself, at a location such as
// At("spec", "defaultEffect").
func (d *diagnoser) policyf(at Location, format string, args ...any) {
	d.add(-1, "", -1, at, format, args)
}

func ruleAt(ri int) Location { return At("spec", "rules").Index(ri) }

// rulef reports a problem of rule ri, at one of its fields.
func (d *diagnoser) rulef(ri int, rid, field, format string, args ...any) {
	d.add(ri, rid, -1, ruleAt(ri).Child(field), format, args)
}

// condf reports a problem of condition ci of rule ri, at at (relative to the
// condition, such as At("values").Index(2)).
func (d *diagnoser) condf(ri int, rid string, ci int, at Location, format string, args ...any) {
	d.add(ri, rid, ci, append(ruleAt(ri).Child("conditions").Index(ci), at...), format, args)
}
