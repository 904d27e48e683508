package engine

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Lint returns warnings for a policy that compiles but probably does not do
// what its author meant. Warnings never block: the webhook returns them to
// kubectl, the CLI prints them.
func Lint(p Policy) []Diagnostic {
	d := &diagnoser{policy: p.ID}
	blockedBy := -1
	for ri := range p.Rules {
		r := &p.Rules[ri]
		if blockedBy >= 0 {
			d.rulef(ri, r.ID, "id", "rule %q can never match: rule %d (%q) denies every call before it",
				r.ID, blockedBy, p.Rules[blockedBy].ID)
		} else if r.Effect == "deny" && len(r.Conditions) == 0 {
			blockedBy = ri
		}
		for ci, c := range r.Conditions {
			if c.Field == "tool_name" && c.Operator == "matches" {
				var pattern string
				if s, err := parseScalar(c.Value); err == nil && s.kind == kindString {
					pattern = s.str
				}
				if !strings.HasPrefix(pattern, "^") && !strings.HasSuffix(pattern, "$") {
					d.condf(ri, r.ID, ci, At("value"), "pattern %q on tool_name is not anchored (^ or $), so it also matches tools whose names merely contain it", pattern)
				}
			}
		}
		for earlier := range ri {
			e := &p.Rules[earlier]
			if e.Effect != r.Effect && sameConditions(e.Conditions, r.Conditions) {
				d.rulef(ri, r.ID, "conditions", "rule %q has the same conditions as rule %d (%q) with the opposite effect; %s",
					r.ID, earlier, e.ID, oppositeOutcome(e, r))
			}
		}
	}
	return d.out
}

func oppositeOutcome(earlier, later *Rule) string {
	if earlier.Effect == "deny" {
		return fmt.Sprintf("rule %q always wins", earlier.ID)
	}
	return fmt.Sprintf("rule %q always wins", later.ID)
}

// sameConditions compares condition sets regardless of order.
func sameConditions(a, b []Condition) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(c Condition) string {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "%s\x00%s\x00%s", c.Field, c.Operator, compactJSON(c.Value))
		for _, v := range c.Values {
			fmt.Fprintf(&buf, "\x00%s", compactJSON(v))
		}
		return buf.String()
	}
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i], kb[i] = key(a[i]), key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

func compactJSON(raw []byte) string {
	s, err := parseScalar(raw)
	if err != nil {
		return string(raw)
	}
	return fmt.Sprintf("%d:%s", s.kind, s.str)
}
