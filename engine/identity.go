package engine

import (
	"cmp"
	"fmt"
	"slices"
)

// Identity is who a namespace's agents are, as its admins registered them
// (Agent and MCPUpstream objects) and its Namespace labels say. In a bundle
// that carries one, a sidecar takes its agent id, roles and environment
// from the Agent for the ServiceAccount it runs as, never from its
// arguments or a request, and reaches only the upstreams that Agent names,
// at the URLs registered here; without an Agent for its ServiceAccount it
// denies every call AGENT_UNREGISTERED.
type Identity struct {
	// Environment is the namespace's toolgate.dev/environment label; ""
	// binds no environment (a request's own is removed).
	Environment string     `json:"environment,omitempty"`
	Agents      []Agent    `json:"agents"`
	Upstreams   []Upstream `json:"upstreams"`
}

// Agent is one Agent object.
type Agent struct {
	// Name is the Agent object's name.
	Name           string `json:"name"`
	ServiceAccount string `json:"serviceAccount"`
	// ID is the agent_id its calls are decided for.
	ID        string   `json:"id"`
	Roles     []string `json:"roles"`
	Upstreams []string `json:"upstreams,omitempty"`
}

// Upstream is one MCPUpstream object: its name and URL, never its
// credential.
type Upstream struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// AgentFor is the Agent registered for serviceAccount, false when none is.
func (id *Identity) AgentFor(serviceAccount string) (Agent, bool) {
	if serviceAccount == "" {
		return Agent{}, false
	}
	for _, a := range id.Agents {
		if a.ServiceAccount == serviceAccount {
			return a, true
		}
	}
	return Agent{}, false
}

// UpstreamURL is the URL registered for the upstream name, false when none
// is.
func (id *Identity) UpstreamURL(name string) (string, bool) {
	for _, u := range id.Upstreams {
		if u.Name == name {
			return u.URL, true
		}
	}
	return "", false
}

// CheckUpstream tells whether agent a may reach the MCP upstream name at
// url: only one id registers under that name at that very URL, and that a
// lists. The error says which is missing.
func (id *Identity) CheckUpstream(a *Agent, name, url string) error {
	registered, ok := id.UpstreamURL(name)
	switch {
	case !ok:
		return fmt.Errorf("no MCPUpstream %q is registered in the namespace", name)
	case registered != url:
		return fmt.Errorf("MCPUpstream %q is registered at %s, not at %s", name, registered, url)
	case !slices.Contains(a.Upstreams, name):
		return fmt.Errorf("Agent %q does not list MCPUpstream %q in spec.upstreams", a.Name, name)
	}
	return nil
}

// sorted is id in canonical order (agents and upstreams by name, roles and
// upstream names sorted), so equal identities encode equally.
func (id Identity) sorted() Identity {
	id.Agents = slices.Clone(id.Agents)
	if id.Agents == nil {
		id.Agents = []Agent{}
	}
	for i := range id.Agents {
		a := &id.Agents[i]
		a.Roles = slices.Sorted(slices.Values(a.Roles))
		if a.Roles == nil {
			a.Roles = []string{}
		}
		a.Upstreams = slices.Sorted(slices.Values(a.Upstreams))
	}
	slices.SortFunc(id.Agents, func(x, y Agent) int { return cmp.Compare(x.Name, y.Name) })
	id.Upstreams = slices.Clone(id.Upstreams)
	if id.Upstreams == nil {
		id.Upstreams = []Upstream{}
	}
	slices.SortFunc(id.Upstreams, func(x, y Upstream) int { return cmp.Compare(x.Name, y.Name) })
	return id
}
