package bundle

import (
	"encoding/json"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

// The conversions copy what is written and nothing more: an absent filter
// stays nil and a list keeps its length (an empty one included), so the
// engine's validation sees exactly what the user wrote and the bundle's
// schema version only moves when a new field is really used.

func rule(r *v1alpha1.Rule) engine.Rule {
	out := engine.Rule{ID: r.ID, Description: r.Description, Priority: r.Priority, Effect: string(r.Effect),
		Subjects: subjects(r.Subjects), Targets: targets(r.Targets), Select: selector(r.Select), When: when(r.When)}
	if r.Approval != nil {
		out.Approval = &engine.RuleApproval{Timeout: r.Approval.Timeout}
	}
	// call is written as "": a bundle without result rules keeps its
	// bytes (and its schema version) whether or not call was spelled out.
	if r.Phase != "" && r.Phase != v1alpha1.PhaseCall {
		out.Phase = engine.Phase(r.Phase)
	}
	for i := range r.Conditions {
		c := &r.Conditions[i]
		ec := leaf(c.Field, c.Operator, c.Value, c.Values, c.CastToNumber)
		if c.Any != nil {
			ec.Any = make([]engine.Condition, 0, len(c.Any))
		}
		for j := range c.Any {
			a := &c.Any[j]
			ea := leaf(a.Field, a.Operator, a.Value, a.Values, a.CastToNumber)
			if a.All != nil {
				ea.All = make([]engine.Condition, 0, len(a.All))
			}
			for k := range a.All {
				l := &a.All[k]
				ea.All = append(ea.All, leaf(l.Field, l.Operator, l.Value, l.Values, l.CastToNumber))
			}
			ec.Any = append(ec.Any, ea)
		}
		out.Conditions = append(out.Conditions, ec)
	}
	return out
}

// leaf converts the test part every condition level shares.
func leaf(field string, op v1alpha1.Operator, value *apiextensionsv1.JSON, values []apiextensionsv1.JSON, castToNumber bool) engine.Condition {
	out := engine.Condition{Field: field, Operator: string(op), CastToNumber: castToNumber}
	if value != nil {
		out.Value = value.Raw
	}
	if values != nil {
		out.Values = make([]json.RawMessage, len(values))
		for i, v := range values {
			out.Values[i] = v.Raw
		}
	}
	return out
}

func subjects(s *v1alpha1.Subjects) *engine.Subjects {
	if s == nil {
		return nil
	}
	return &engine.Subjects{Agents: slices.Clone(s.Agents), Roles: slices.Clone(s.Roles)}
}

func targets(t *v1alpha1.Targets) *engine.Targets {
	if t == nil {
		return nil
	}
	out := &engine.Targets{Servers: slices.Clone(t.Servers), Tools: slices.Clone(t.Tools)}
	if t.Resources != nil {
		out.Resources = make([]engine.ResourceTarget, len(t.Resources))
		for i, r := range t.Resources {
			out.Resources[i] = engine.ResourceTarget{Type: r.Type, Names: slices.Clone(r.Names)}
		}
	}
	return out
}

func selector(s *v1alpha1.Select) *engine.Select {
	if s == nil {
		return nil
	}
	out := &engine.Select{Action: slices.Clone(s.Action), SideEffect: slices.Clone(s.SideEffect),
		Tool: s.Tool, ResourceType: s.ResourceType}
	if s.Context != nil {
		out.Context = make(map[string]json.RawMessage, len(s.Context))
		for k, v := range s.Context {
			out.Context[k] = v.Raw
		}
	}
	return out
}

func when(w *v1alpha1.When) *engine.When {
	if w == nil {
		return nil
	}
	out := &engine.When{Environments: slices.Clone(w.Environments), Sensitivity: slices.Clone(w.Sensitivity),
		ActorConfidence: slices.Clone(w.ActorConfidence), RateLimit: limit(w.RateLimit), TokenBudget: limit(w.TokenBudget)}
	if w.Schedule != nil {
		out.Schedule = make([]engine.Window, len(w.Schedule))
		for i, s := range w.Schedule {
			ew := engine.Window{From: s.From, To: s.To, TimeZone: s.TimeZone}
			if s.Days != nil {
				ew.Days = make([]string, len(s.Days))
				for j, d := range s.Days {
					ew.Days[j] = string(d)
				}
			}
			out.Schedule[i] = ew
		}
	}
	return out
}

func limit(l *v1alpha1.Limit) *engine.Limit {
	if l == nil {
		return nil
	}
	return &engine.Limit{Max: l.Max, Window: l.Window, Per: string(l.Per), Store: string(l.Store), FailOpen: l.FailOpen}
}
