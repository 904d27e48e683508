// Package lint finds what in a policy that compiles is probably not what
// its author meant: rules that can never match, unanchored tool patterns,
// resources only denies are bound to, a tool's arguments read under one
// spelling. Its warnings never block; the webhook returns them to kubectl
// and `toolgate validate` prints them. Review is what admitting a policy
// answers: the engine's compile diagnostics, else these warnings.
package lint

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/engine"
)

// Review is what admitting p answers, in the webhook and in `toolgate
// validate` alike: the compile step's diagnostics (CheckPolicy), which
// refuse p, and, for a p without any, Lint's warnings.
func Review(p engine.Policy) (problems, warnings []engine.Diagnostic) {
	if problems = engine.CheckPolicy(p); len(problems) > 0 {
		return problems, nil
	}
	return nil, Lint(p)
}

// Lint returns warnings for a policy that compiles but probably does not do
// what its author meant. Warnings never block: the webhook returns them to
// kubectl, the CLI prints them.
func Lint(p engine.Policy) []engine.Diagnostic {
	d := &diagnoser{policy: p.ID}
	if p.Cluster() {
		d.kind = engine.KindClusterPolicy
	}
	blockedBy := -1
	tiered := p.Tiered()
	for ri := range p.Rules {
		r := &p.Rules[ri]
		lintGateway(d, ri, r, tiered)
		if r.Phase != "" {
			// A result rule judges a result: the call rules' scan order
			// and checks do not apply to it.
			lintResultRule(d, ri, r)
			lintPatterns(d, ri, r)
			continue
		}
		if tiered {
			// Order does not decide in a tiered policy: the scan-order
			// checks below do not apply.
			lintPatterns(d, ri, r)
			continue
		}
		if blockedBy >= 0 {
			d.rulef(ri, r.ID, "id", "rule %q can never match: rule %d (%q) denies every call before it",
				r.ID, blockedBy, p.Rules[blockedBy].ID)
		} else if r.Effect == "deny" && len(r.Conditions) == 0 && !hasFilters(r) {
			blockedBy = ri
		}
		lintPatterns(d, ri, r)
		for earlier := range ri {
			e := &p.Rules[earlier]
			if e.Phase != r.Phase {
				continue
			}
			if e.Effect != r.Effect && !hasFilters(e) && !hasFilters(r) && sameConditions(e.Conditions, r.Conditions) {
				d.rulef(ri, r.ID, "conditions", "rule %q has the same conditions as rule %d (%q) with the opposite effect; %s",
					r.ID, earlier, e.ID, oppositeOutcome(e, r))
			}
		}
	}
	if tiered {
		lintResources(d, p.Rules)
	}
	lintArgumentSpellings(d, p.Rules)
	return d.out
}

func hasFilters(r *engine.Rule) bool {
	return r.Subjects != nil || r.Targets != nil || r.Select != nil || r.When != nil
}

// lintPatterns warns about tool_name patterns that match more than their
// author likely meant.
func lintPatterns(d *diagnoser, ri int, r *engine.Rule) {
	for ci, c := range r.Conditions {
		if c.Field == engine.FieldToolName && c.Operator == "matches" {
			pattern, _ := engine.ScalarString(c.Value)
			if !strings.HasPrefix(pattern, "^") && !strings.HasSuffix(pattern, "$") {
				d.condf(ri, r.ID, ci, engine.At("value"), "pattern %q on tool_name is not anchored (^ or $), so it also matches tools whose names merely contain it", pattern)
			}
		}
	}
}

// lintGateway warns about gateway filters that cannot do what they say.
func lintGateway(d *diagnoser, ri int, r *engine.Rule, tiered bool) {
	at := func(names ...string) engine.Location { return append(ruleAt(ri), engine.At(names...)...) }
	boundToResources := r.Targets != nil && r.Targets.Resources != nil
	if tiered && r.Select != nil && r.Select.ResourceType != "" && !boundToResources {
		d.add(ri, r.ID, -1, at("select", "resourceType"),
			"rule %q can never apply: in a tiered policy select.resourceType holds only in a resource's evaluation, which sees only rules with targets.resources", []any{r.ID})
	}
	if r.When != nil {
		lintLimit(d, ri, r, r.When.RateLimit, "rateLimit")
		lintLimit(d, ri, r, r.When.TokenBudget, "tokenBudget")
	}
	if r.When == nil || engine.Effect(r.Effect) != engine.EffectAllow {
		return
	}
	if r.When.RateLimit != nil {
		d.add(ri, r.ID, -1, at("when", "rateLimit"),
			"an allow rule with rateLimit applies only once the limit is reached; to allow calls while under it, allow them and add a deny rule with the limit in a higher tier", nil)
	}
	if r.When.TokenBudget != nil {
		d.add(ri, r.ID, -1, at("when", "tokenBudget"),
			"an allow rule with tokenBudget applies only once the budget is exceeded; to allow calls within it, allow them and add a deny rule with the budget in a higher tier", nil)
	}
}

// lintLimit warns about where a limit (nil: none) is counted (issue 30):
// failOpen, which trades the limit for availability while the store is
// down, and a per-namespace count kept by each sidecar alone.
func lintLimit(d *diagnoser, ri int, r *engine.Rule, l *engine.Limit, name string) {
	if l == nil {
		return
	}
	at := ruleAt(ri).Child("when").Child(name)
	if l.FailOpen {
		d.add(ri, r.ID, -1, at.Child("failOpen"),
			"failOpen lets calls through uncounted while the usage store is down, unreachable or slower than --usage-store-timeout: the limit then holds for no one; without it such calls are denied USAGE_UNAVAILABLE", nil)
	}
	if l.Per == engine.PerNamespace && (l.Store == "" || l.Store == engine.StoreLocal) {
		d.add(ri, r.ID, -1, at.Child("per"),
			"per: namespace with store: local counts per sidecar: with N replicas the namespace may make N x max calls; store: shared counts once across them", nil)
	}
}

// lintResources warns about resources that only deny, warn or audit rules
// are bound to in a tiered policy: a call touching one that none of them
// matches is denied (IMPLICIT_DENY).
func lintResources(d *diagnoser, rules []engine.Rule) {
	type binding struct {
		first  int
		allows bool
	}
	bound := map[engine.ResourceRef]*binding{}
	var order []engine.ResourceRef
	for ri := range rules {
		r := &rules[ri]
		if r.Targets == nil || r.Phase != "" {
			continue // a result rule leaves no implicit deny
		}
		for _, t := range r.Targets.Resources {
			for _, n := range t.Names {
				ref := engine.ResourceRef{Type: t.Type, Name: n}
				b := bound[ref]
				if b == nil {
					b = &binding{first: ri}
					bound[ref] = b
					order = append(order, ref)
				}
				b.allows = b.allows || engine.Effect(r.Effect) == engine.EffectAllow
			}
		}
	}
	for _, ref := range order {
		if b := bound[ref]; !b.allows {
			r := &rules[b.first]
			d.add(b.first, r.ID, -1, append(ruleAt(b.first), engine.At("targets", "resources")...),
				"resource %s/%s is bound only by deny, warn or audit rules: a call touching it that none of them matches is denied (IMPLICIT_DENY); bind an allow rule to it for the calls to let through",
				[]any{ref.Type, ref.Name})
		}
	}
}

func oppositeOutcome(earlier, later *engine.Rule) string {
	if earlier.Effect == "deny" {
		return fmt.Sprintf("rule %q always wins", earlier.ID)
	}
	return fmt.Sprintf("rule %q always wins", later.ID)
}

// sameConditions compares condition sets regardless of order.
func sameConditions(a, b []engine.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(c engine.Condition) string {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "%s\x00%s\x00%t\x00%s", c.Field, c.Operator, c.CastToNumber, engine.ScalarKey(c.Value))
		for _, v := range c.Values {
			fmt.Fprintf(&buf, "\x00%s", engine.ScalarKey(v))
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

// diagnoser collects one policy's warnings, located as the engine locates
// its compile diagnostics.
type diagnoser struct {
	policy, kind string
	out          []engine.Diagnostic
}

func (d *diagnoser) add(ri int, rid string, ci int, at engine.Location, format string, args []any) {
	d.out = append(d.out, engine.Diagnostic{PolicyID: d.policy, PolicyKind: d.kind, RuleIndex: ri, RuleID: rid, ConditionIndex: ci,
		Field: at.String(), Location: at, Message: fmt.Sprintf(format, args...)})
}

func ruleAt(ri int) engine.Location { return engine.At("spec", "rules").Index(ri) }

// rulef reports a problem of rule ri, at one of its fields.
func (d *diagnoser) rulef(ri int, rid, field, format string, args ...any) {
	d.add(ri, rid, -1, ruleAt(ri).Child(field), format, args)
}

// condf reports a problem of condition ci of rule ri, at at (relative to the
// condition).
func (d *diagnoser) condf(ri int, rid string, ci int, at engine.Location, format string, args ...any) {
	d.add(ri, rid, ci, append(ruleAt(ri).Child("conditions").Index(ci), at...), format, args)
}
