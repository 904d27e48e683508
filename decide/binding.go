package decide

import (
	"slices"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
)

// binding is what the sidecar puts into every request in place of what
// the client sent: its agent_id, roles and environment, each boxed once so
// overriding a request does not allocate. It is computed once per bundle
// (newState): from the bundle's registered Agent for the sidecar's
// ServiceAccount when the namespace registers its agents, from the
// sidecar's arguments otherwise.
type binding struct {
	agentID, roles, environment boundField
	// unregistered: the bundle registers the namespace's agents and none
	// is for this ServiceAccount; every call is denied AGENT_UNREGISTERED.
	unregistered bool
	// agent is the registered Agent bound, nil when the arguments bind.
	agent *engine.Agent
}

// boundField is one bound request field. With set false it binds nothing
// (the request's own value is used); with set true and a nil value the
// field is removed from the request.
type boundField struct {
	set   bool
	value any
}

// argumentBinding binds what the sidecar's arguments say: "" and nil bind
// nothing.
func argumentBinding(cfg *Config) binding {
	var b binding
	if cfg.AgentID != "" {
		b.agentID = boundField{true, cfg.AgentID}
	}
	if cfg.Roles != nil {
		b.roles = boundField{true, boxRoles(cfg.Roles)}
	}
	if cfg.Environment != "" {
		b.environment = boundField{true, cfg.Environment}
	}
	return b
}

// registeredBinding binds the Agent id registers for serviceAccount: its
// agent id and roles, and the namespace's environment (none: the
// request's own is removed), whatever the arguments or a request say.
func registeredBinding(id *engine.Identity, serviceAccount string) binding {
	a, ok := id.AgentFor(serviceAccount)
	if !ok {
		return binding{unregistered: true}
	}
	b := binding{agent: &a, agentID: boundField{true, a.ID}, roles: boundField{true, boxRoles(a.Roles)},
		environment: boundField{set: true}}
	if id.Environment != "" {
		b.environment.value = id.Environment
	}
	return b
}

func boxRoles(roles []string) []any {
	out := make([]any, len(roles))
	for i, r := range roles {
		out[i] = r
	}
	return out
}

// fields are the bound fields with their request keys.
func (b *binding) fields() [3]struct {
	name string
	f    *boundField
} {
	return [3]struct {
		name string
		f    *boundField
	}{{engine.FieldAgentID, &b.agentID}, {engine.FieldRoles, &b.roles}, {engine.FieldEnvironment, &b.environment}}
}

// fill sets the bound fields in req (nil: none), and returns their names:
// what a request the sidecar builds itself (an MCP tools/list check) knows
// without a client.
func (b *binding) fill(req engine.Request) []string {
	var names []string
	for _, f := range b.fields() {
		if !f.f.set {
			continue
		}
		if req != nil {
			if f.f.value == nil {
				delete(req, f.name)
			} else {
				req[f.name] = f.f.value
			}
		}
		names = append(names, f.name)
	}
	return names
}

// bind replaces the request's bound fields, noting in ev (for the
// decision log; nil for none) and in the metrics what a client asked for
// that differed.
func (d *Decider) bind(b *binding, req engine.Request, ev *decisionlog.Event) {
	if b.agentID.set {
		got, present := req[engine.FieldAgentID]
		if id, isString := got.(string); !isString || id != b.agentID.value {
			if present {
				d.metrics.IdentityMismatches.Inc()
				if ev != nil {
					ev.AgentMismatch, ev.RequestedAgentID = true, engine.Stringify(got)
				}
			}
			req[engine.FieldAgentID] = b.agentID.value
		}
	}
	if b.roles.set {
		got, present := req[engine.FieldRoles]
		if !sameRoles(got, b.roles.value.([]any)) {
			if present {
				d.metrics.BindingOverrides[bindRoles].Inc()
				if ev != nil {
					ev.RolesMismatch, ev.RequestedRoles = true, engine.Stringify(got)
				}
			}
			req[engine.FieldRoles] = b.roles.value
		}
	}
	if b.environment.set {
		got, present := req[engine.FieldEnvironment]
		want := b.environment.value
		if env, isString := got.(string); present && (!isString || want == nil || env != want) {
			d.metrics.BindingOverrides[bindEnvironment].Inc()
			if ev != nil {
				ev.EnvironmentMismatch, ev.RequestedEnvironment = true, engine.Stringify(got)
			}
			if want == nil {
				delete(req, engine.FieldEnvironment)
			}
		}
		if want != nil && got != want {
			req[engine.FieldEnvironment] = want
		}
	}
}

// sameRoles tells whether a request's roles are the strings of want, in
// any order: roles are a set, and a client listing them in another order
// claims nothing else.
func sameRoles(got any, want []any) bool {
	list, ok := got.([]any)
	if !ok || len(list) != len(want) {
		return false
	}
	for _, r := range list {
		if _, ok := r.(string); !ok || !slices.Contains(want, r) {
			return false
		}
	}
	for _, w := range want {
		if !slices.Contains(list, w) {
			return false
		}
	}
	return true
}

// Bind sets the bound agent id, roles and environment in req (nil: none),
// and returns their names: what a request the sidecar builds itself (an
// MCP tools/list check) knows without a client.
func (d *Decider) Bind(req engine.Request) []string { return d.state.Load().binding.fill(req) }
