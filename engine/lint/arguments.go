package lint

import (
	"strings"

	"github.com/toolgate/toolgate/engine"
)

// argumentSpellings are the request fields a tool's arguments come in, as
// the caller's framework sends them: input (MCP, the Claude Agent SDK: one
// object), args and kwargs (LangChain, plain functions: positional and
// keyword; the Python client's guard binds every named parameter into
// kwargs, leaving only *args in args).
var argumentSpellings = [...]string{engine.FieldInput, engine.FieldArgs, engine.FieldKwargs}

// lintArgumentSpellings warns about a tool whose arguments the policy reads
// only as args or only as kwargs: a rule on kwargs.amount does not read a
// call that passes the amount as args.0 or input.amount, so such a call
// slips past a deny written for it. input alone is not warned about: MCP
// and the Claude Agent SDK send nothing else. A tool is named by its rules'
// tool_name conditions (eq, in) or targets.tools (toolKeys); a rule naming
// no tool reads for every tool. The warning is silenced by a rule that reads
// another spelling for the tool, or by a deny rule that requires the one
// read (its only condition besides the tool's is that field's is_empty or
// not_exists): a call passing the argument otherwise is then denied.
func lintArgumentSpellings(d *diagnoser, rules []engine.Rule) {
	type reading struct {
		ri, ci int
		field  string
	}
	type tool struct {
		reads    map[string]reading // spelling: the first condition reading it
		required map[string]bool
	}
	tools := map[string]*tool{}
	var order []string
	every := &tool{reads: map[string]reading{}, required: map[string]bool{}}
	for ri := range rules {
		r := &rules[ri]
		names := engine.RuleTools(r)
		reads := map[string]reading{}
		for ci, c := range r.Conditions {
			eachTest(c, func(t engine.Condition) {
				if s := argumentSpelling(t.Field); s != "" {
					if _, ok := reads[s]; !ok {
						reads[s] = reading{ri, ci, t.Field}
					}
				}
			})
		}
		required := requiredSpelling(r)
		targets := []*tool{every}
		if names != nil {
			targets = targets[:0]
			for _, n := range names {
				t := tools[n]
				if t == nil {
					t = &tool{reads: map[string]reading{}, required: map[string]bool{}}
					tools[n] = t
					order = append(order, n)
				}
				targets = append(targets, t)
			}
		}
		for _, t := range targets {
			for s, at := range reads {
				if _, ok := t.reads[s]; !ok {
					t.reads[s] = at
				}
			}
			if required != "" {
				t.required[required] = true
			}
		}
	}
	for _, n := range order {
		t := tools[n]
		var read []string
		for _, s := range argumentSpellings {
			_, byTool := t.reads[s]
			_, byAll := every.reads[s]
			if byTool || byAll {
				read = append(read, s)
			}
		}
		if len(read) != 1 || read[0] == engine.FieldInput || t.required[read[0]] || every.required[read[0]] {
			continue
		}
		s := read[0]
		at, ok := t.reads[s]
		if !ok {
			at = every.reads[s]
		}
		var others []string
		for _, o := range argumentSpellings {
			if o != s {
				others = append(others, o)
			}
		}
		d.condf(at.ri, rules[at.ri].ID, at.ci, nil,
			"tool %q's arguments are read only as %s (%s): a call passing them as %s is not read by this policy, so it slips past a deny written here; read those too, or deny a %s call whose %s is empty",
			n, s, at.field, strings.Join(others, " or "), n, at.field)
	}
}

// argumentSpelling is the argument field a condition's field is under
// (input, args or kwargs), or "".
func argumentSpelling(field string) string {
	head, _, _ := strings.Cut(field, ".")
	for _, s := range argumentSpellings {
		if head == s {
			return s
		}
	}
	return ""
}

// requiredSpelling is the argument spelling a deny rule requires: its one
// condition besides the tool's is is_empty or not_exists on a field under
// it, so a call that leaves that field out is denied. "" otherwise.
func requiredSpelling(r *engine.Rule) string {
	if engine.Effect(r.Effect) != engine.EffectDeny || r.Subjects != nil || r.Select != nil || r.When != nil ||
		(r.Targets != nil && (r.Targets.Servers != nil || r.Targets.Resources != nil)) {
		return ""
	}
	spelling := ""
	for _, c := range r.Conditions {
		if c.Field == engine.FieldToolName && (c.Operator == "eq" || c.Operator == "in") {
			continue
		}
		s := argumentSpelling(c.Field)
		if spelling != "" || s == "" || (c.Operator != "is_empty" && c.Operator != "not_exists") {
			return ""
		}
		spelling = s
	}
	return spelling
}

// eachTest calls f on every test in c: c itself, or the members of its
// groups.
func eachTest(c engine.Condition, f func(engine.Condition)) {
	if c.Any == nil && c.All == nil {
		f(c)
		return
	}
	for _, m := range c.Any {
		eachTest(m, f)
	}
	for _, m := range c.All {
		eachTest(m, f)
	}
}
