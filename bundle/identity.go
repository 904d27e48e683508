package bundle

import (
	"cmp"
	"slices"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

// Registration is what a namespace says about who its agents are: its
// Agents and MCPUpstreams, and its Namespace's labels.
type Registration struct {
	Agents    []v1alpha1.Agent
	Upstreams []v1alpha1.MCPUpstream
	// Labels are the Namespace's labels (toolgate.dev/enforce,
	// toolgate.dev/environment).
	Labels map[string]string
}

// Registered tells whether the namespace's agents are registered: it has
// an Agent, or is labelled toolgate.dev/enforce=true. The injector and the
// bundle builder both ask it.
func (r Registration) Registered() bool {
	return len(r.Agents) > 0 || r.Labels[v1alpha1.LabelEnforce] == "true"
}

// Identity converts a namespace's registration, nil when its agents are not
// registered. Of Agents naming the same ServiceAccount only the first by
// age (then name) counts (Conflicts names the others), as Gateway API
// resolves conflicting routes: adding an Agent never takes an identity
// away from a running one.
func Identity(r Registration) *engine.Identity {
	if !r.Registered() {
		return nil
	}
	id := &engine.Identity{Environment: r.Labels[v1alpha1.LabelEnvironment], Agents: []engine.Agent{}, Upstreams: []engine.Upstream{}}
	conflicts := Conflicts(r.Agents)
	for i := range r.Agents {
		a := &r.Agents[i]
		if conflicts[a.Name] != "" {
			continue
		}
		id.Agents = append(id.Agents, engine.Agent{Name: a.Name, ServiceAccount: a.Spec.ServiceAccountName, ID: a.ID(),
			Roles: slices.Clone(a.Spec.Roles), Upstreams: slices.Clone(a.Spec.Upstreams)})
	}
	for i := range r.Upstreams {
		u := &r.Upstreams[i]
		id.Upstreams = append(id.Upstreams, engine.Upstream{Name: u.Name, URL: u.Spec.URL})
	}
	return id
}

// Conflicts maps each Agent that loses its ServiceAccount to an older one
// to the name of the Agent that holds it.
func Conflicts(agents []v1alpha1.Agent) map[string]string {
	order := make([]*v1alpha1.Agent, len(agents))
	for i := range agents {
		order[i] = &agents[i]
	}
	slices.SortFunc(order, func(x, y *v1alpha1.Agent) int {
		if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	})
	holder := map[string]string{}
	out := map[string]string{}
	for _, a := range order {
		sa := a.Spec.ServiceAccountName
		if h, taken := holder[sa]; taken {
			out[a.Name] = h
			continue
		}
		holder[sa] = a.Name
	}
	return out
}

// Pins are the pinned tool definitions of the namespace's MCPUpstreams,
// whether or not its agents are registered (engine.UpstreamPins says why
// they are not part of Identity), with the pinning applied written out:
// strict when spec.pinning is unset.
func Pins(upstreams []v1alpha1.MCPUpstream) []engine.UpstreamPins {
	var out []engine.UpstreamPins
	for i := range upstreams {
		u := &upstreams[i]
		if len(u.Spec.PinnedTools) == 0 {
			continue
		}
		tools := make(map[string]string, len(u.Spec.PinnedTools))
		for name, digest := range u.Spec.PinnedTools {
			tools[name] = string(digest)
		}
		out = append(out, engine.UpstreamPins{Upstream: u.Name, Pinning: string(u.Spec.EffectivePinning()), Tools: tools})
	}
	return out
}

// Register sets what the namespace's registration puts in b: its Identity
// (nil unless its agents are registered) and its upstreams' Pins (always),
// and the schema version they need. The operator and `toolgate bundle`
// both call it.
func Register(b *engine.Bundle, r Registration) {
	b.Identity = Identity(r)
	b.Pins = Pins(r.Upstreams)
	b.SchemaVersion = b.NeededSchemaVersion()
}
