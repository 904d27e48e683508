package decide

import (
	"slices"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
)

// binding is what the sidecar puts into every request in place of what
// the client sent: its agent_id, roles and environment, each boxed once so
// overriding a request does not allocate. A nil field binds nothing.
type binding struct {
	agentID     any
	roles       any // []any of strings
	environment any
}

func newBinding(o Config) binding {
	var b binding
	if o.AgentID != "" {
		b.agentID = o.AgentID
	}
	if o.Roles != nil {
		roles := make([]any, len(o.Roles))
		for i, r := range o.Roles {
			roles[i] = r
		}
		b.roles = roles
	}
	if o.Environment != "" {
		b.environment = o.Environment
	}
	return b
}

// Fill sets the bound fields in req, and returns their names: what a
// request the sidecar builds itself (an MCP tools/list check) knows
// without a client.
func (b *binding) fill(req engine.Request) []string {
	var names []string
	for _, f := range []struct {
		name  string
		value any
	}{{engine.FieldAgentID, b.agentID}, {engine.FieldRoles, b.roles}, {engine.FieldEnvironment, b.environment}} {
		if f.value != nil {
			if req != nil {
				req[f.name] = f.value
			}
			names = append(names, f.name)
		}
	}
	return names
}

// bind replaces the request's bound fields, noting in ev (for the
// decision log; nil for none) and in the metrics what a client asked for
// that differed.
func (d *Decider) bind(req engine.Request, ev *decisionlog.Event) {
	b := &d.binding
	if b.agentID != nil {
		got, present := req[engine.FieldAgentID]
		if id, isString := got.(string); !isString || id != d.cfg.AgentID {
			if present {
				d.metrics.IdentityMismatches.Inc()
				if ev != nil {
					ev.AgentMismatch, ev.RequestedAgentID = true, engine.Stringify(got)
				}
			}
			req[engine.FieldAgentID] = b.agentID
		}
	}
	if b.roles != nil {
		got, present := req[engine.FieldRoles]
		if !sameRoles(got, d.cfg.Roles) {
			if present {
				d.metrics.BindingOverrides[bindRoles].Inc()
				if ev != nil {
					ev.RolesMismatch, ev.RequestedRoles = true, engine.Stringify(got)
				}
			}
			req[engine.FieldRoles] = b.roles
		}
	}
	if b.environment != nil {
		got, present := req[engine.FieldEnvironment]
		if env, isString := got.(string); !isString || env != d.cfg.Environment {
			if present {
				d.metrics.BindingOverrides[bindEnvironment].Inc()
				if ev != nil {
					ev.EnvironmentMismatch, ev.RequestedEnvironment = true, engine.Stringify(got)
				}
			}
			req[engine.FieldEnvironment] = b.environment
		}
	}
}

// sameRoles tells whether a request's roles are the strings of want, in
// any order: roles are a set, and a client listing them in another order
// claims nothing else.
func sameRoles(got any, want []string) bool {
	list, ok := got.([]any)
	if !ok || len(list) != len(want) {
		return false
	}
	for _, r := range list {
		if s, ok := r.(string); !ok || !slices.Contains(want, s) {
			return false
		}
	}
	for _, w := range want {
		if !slices.Contains(list, any(w)) {
			return false
		}
	}
	return true
}

// Bind sets the bound agent id, roles and environment in req (nil: none),
// and returns their names: what a request the sidecar builds itself (an
// MCP tools/list check) knows without a client.
func (d *Decider) Bind(req engine.Request) []string { return d.binding.fill(req) }
