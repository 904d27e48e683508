package sidecar

import (
	"slices"
	"strings"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

// rolesFlag binds --roles to Options.Roles: nil when the flag is not
// given, so the request's own roles are used.
type rolesFlag struct{ roles *[]string }

func (f rolesFlag) String() string {
	if f.roles == nil || *f.roles == nil {
		return ""
	}
	return strings.Join(*f.roles, ",")
}

func (f rolesFlag) Set(s string) error {
	roles, err := v1alpha1.ParseRoles(s)
	if err != nil {
		return err
	}
	*f.roles = roles
	return nil
}

func (rolesFlag) Type() string { return "role,role" }

// binding is what the sidecar puts into every request in place of what
// the client sent: its agent_id, roles and environment, each boxed once so
// overriding a request does not allocate. A nil field binds nothing.
type binding struct {
	agentID     any
	roles       any // []any of strings
	environment any
}

func newBinding(o Options) binding {
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

// fill sets the bound fields in req, and returns their names: what a
// request the sidecar builds itself (an MCP tools/list check) knows
// without a client.
func (b *binding) fill(req engine.Request) []string {
	var names []string
	for _, f := range []struct {
		name  string
		value any
	}{{"agent_id", b.agentID}, {"roles", b.roles}, {"environment", b.environment}} {
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
// decision log) and in the metrics what a client asked for that differed.
func (s *Server) bind(req engine.Request, ev *event) {
	b := &s.binding
	if b.agentID != nil {
		got, present := req["agent_id"]
		if id, isString := got.(string); !isString || id != s.opts.AgentID {
			if present {
				ev.mismatch, ev.requestedAgentID = true, engine.Stringify(got)
				s.metrics.identityMismatches.Inc()
			}
			req["agent_id"] = b.agentID
		}
	}
	if b.roles != nil {
		got, present := req["roles"]
		if !sameRoles(got, s.opts.Roles) {
			if present {
				ev.rolesMismatch, ev.requestedRoles = true, engine.Stringify(got)
				s.metrics.bindingOverrides[bindRoles].Inc()
			}
			req["roles"] = b.roles
		}
	}
	if b.environment != nil {
		got, present := req["environment"]
		if env, isString := got.(string); !isString || env != s.opts.Environment {
			if present {
				ev.environmentMismatch, ev.requestedEnvironment = true, engine.Stringify(got)
				s.metrics.bindingOverrides[bindEnvironment].Inc()
			}
			req["environment"] = b.environment
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
