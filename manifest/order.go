package manifest

import (
	"cmp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// byField orders errors by the field they name, list indices by number, and
// those naming none last: the schema validator walks an object's properties
// in map order, so its own order changes from run to run.
func byField(a, b *field.Error) int {
	if c := cmp.Compare(boolInt(noField(a)), boolInt(noField(b))); c != 0 {
		return c
	}
	x, y := a.Field, b.Field
	for x != "" && y != "" {
		dx, dy := digitRun(x), digitRun(y)
		if dx > 0 && dy > 0 {
			// Without leading zeros, the longer number is the larger.
			if c := cmp.Or(cmp.Compare(dx, dy), strings.Compare(x[:dx], y[:dy])); c != 0 {
				return c
			}
			x, y = x[dx:], y[dy:]
			continue
		}
		if x[0] != y[0] {
			return cmp.Compare(x[0], y[0])
		}
		x, y = x[1:], y[1:]
	}
	return cmp.Compare(len(x), len(y))
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// noField is true for an error about the whole object (a nil field.Path
// prints as "<nil>").
func noField(e *field.Error) bool { return e.Field == "" || e.Field == "<nil>" }
