package lint

import (
	"strings"

	"github.com/toolgate/toolgate/engine"
)

// lintResultRule warns about a result rule that reads no output field: it
// judges every result of the calls it selects by the call alone, which a
// call rule does before the tool runs (and without spending its work).
func lintResultRule(d *diagnoser, ri int, r *engine.Rule) {
	reads := false
	for _, c := range r.Conditions {
		eachTest(c, func(t engine.Condition) {
			reads = reads || t.Field == engine.FieldOutput || strings.HasPrefix(t.Field, engine.FieldOutput+".")
		})
	}
	if !reads {
		d.rulef(ri, r.ID, "conditions", "result rule %q reads no output field, so it decides every result of the calls it selects alike: test output.text, output.structured, output.isError or output.size, or make it a call rule, which decides before the tool runs", r.ID)
	}
}
