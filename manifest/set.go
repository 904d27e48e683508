package manifest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

// Policy is a loaded Policy and where it came from.
type Policy struct {
	Object v1alpha1.Policy
	Source Source
}

// FrozenAgent is a loaded FrozenAgent and where it came from.
type FrozenAgent struct {
	Object v1alpha1.FrozenAgent
	Source Source
}

// Agent is a loaded Agent and where it came from.
type Agent struct {
	Object v1alpha1.Agent
	Source Source
}

// MCPUpstream is a loaded MCPUpstream and where it came from.
type MCPUpstream struct {
	Object v1alpha1.MCPUpstream
	Source Source
}

// Set is the objects read from some paths, in input order.
type Set struct {
	Policies     []Policy
	FrozenAgents []FrozenAgent
	Agents       []Agent
	Upstreams    []MCPUpstream
	// Skipped are files found in directories that hold no manifest (no
	// apiVersion, kind, metadata or spec), such as example requests.
	Skipped []string
	// Rejected counts, by kind, the objects read that the API server would
	// reject; Load's Errors say why, and they are in no list above.
	Rejected map[string]int
	// OtherKinds counts, by kind, the objects of other API groups skipped
	// under Options.SkipOtherKinds.
	OtherKinds map[string]int

	opts Options
}

// Len is the number of objects.
func (s *Set) Len() int {
	return len(s.Policies) + len(s.FrozenAgents) + len(s.Agents) + len(s.Upstreams)
}

// PolicyObjects returns the Policies, for bundle.Build.
func (s *Set) PolicyObjects() []v1alpha1.Policy {
	out := make([]v1alpha1.Policy, len(s.Policies))
	for i := range s.Policies {
		out[i] = s.Policies[i].Object
	}
	return out
}

// FrozenAgentObjects returns the FrozenAgents, for bundle.Build.
func (s *Set) FrozenAgentObjects() []v1alpha1.FrozenAgent {
	out := make([]v1alpha1.FrozenAgent, len(s.FrozenAgents))
	for i := range s.FrozenAgents {
		out[i] = s.FrozenAgents[i].Object
	}
	return out
}

// Registration is the Agents and MCPUpstreams, for bundle.Identity. The
// Namespace's labels are not in manifests: a bundle built offline registers
// its agents when there is an Agent, and binds no environment.
func (s *Set) Registration() bundle.Registration {
	var r bundle.Registration
	for i := range s.Agents {
		r.Agents = append(r.Agents, s.Agents[i].Object)
	}
	for i := range s.Upstreams {
		r.Upstreams = append(r.Upstreams, s.Upstreams[i].Object)
	}
	return r
}

// Namespaces lists, sorted, the namespaces objects name; objects without one
// are not counted (they go wherever they are applied).
func (s *Set) Namespaces() []string {
	var out []string
	add := func(ns string) {
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	for i := range s.Policies {
		add(s.Policies[i].Object.Namespace)
	}
	for i := range s.FrozenAgents {
		add(s.FrozenAgents[i].Object.Namespace)
	}
	for i := range s.Agents {
		add(s.Agents[i].Object.Namespace)
	}
	for i := range s.Upstreams {
		add(s.Upstreams[i].Object.Namespace)
	}
	slices.Sort(out)
	return out
}

// InNamespace returns the objects that would live in ns: those naming it and
// those naming no namespace, which get ns. An empty ns keeps everything as is.
func (s *Set) InNamespace(ns string) *Set {
	if ns == "" {
		return &Set{Policies: slices.Clone(s.Policies), FrozenAgents: slices.Clone(s.FrozenAgents),
			Agents: slices.Clone(s.Agents), Upstreams: slices.Clone(s.Upstreams)}
	}
	out := &Set{}
	for _, p := range s.Policies {
		if p.Object.Namespace == "" || p.Object.Namespace == ns {
			p.Object.Namespace = ns
			out.Policies = append(out.Policies, p)
		}
	}
	for _, f := range s.FrozenAgents {
		if f.Object.Namespace == "" || f.Object.Namespace == ns {
			f.Object.Namespace = ns
			out.FrozenAgents = append(out.FrozenAgents, f)
		}
	}
	for _, a := range s.Agents {
		if a.Object.Namespace == "" || a.Object.Namespace == ns {
			a.Object.Namespace = ns
			out.Agents = append(out.Agents, a)
		}
	}
	for _, u := range s.Upstreams {
		if u.Object.Namespace == "" || u.Object.Namespace == ns {
			u.Object.Namespace = ns
			out.Upstreams = append(out.Upstreams, u)
		}
	}
	return out
}

// OneNamespace returns the objects of the namespace one bundle is built
// for: ns, or when ns is empty the only namespace the objects name (none:
// all of them as they are). Objects from several namespaces without ns are
// an error, since a bundle is per namespace; so are duplicates in it.
func (s *Set) OneNamespace(ns string) (*Set, error) {
	if ns == "" {
		switch nss := s.Namespaces(); len(nss) {
		case 0:
		case 1:
			ns = nss[0]
		default:
			return nil, fmt.Errorf("objects from several namespaces (%s): a bundle is per namespace, choose one with -n",
				strings.Join(nss, ", "))
		}
	}
	set := s.InNamespace(ns)
	if dups := set.Duplicates(); len(dups) > 0 {
		return nil, dups
	}
	return set, nil
}

// Duplicates reports every object whose kind, namespace and name an earlier
// object already has: the API server would keep only one of them.
func (s *Set) Duplicates() Errors {
	type key struct{ kind, ns, name string }
	seen := map[key]Source{}
	var errs Errors
	check := func(kind, ns, name string, src Source) {
		if name == "" {
			return // a missing name is validate's to report
		}
		k := key{kind, ns, name}
		if first, dup := seen[k]; dup {
			where := "without a namespace"
			if ns != "" {
				where = fmt.Sprintf("in namespace %q", ns)
			}
			errs = append(errs, &Error{Source: src, Kind: kind, Name: name, Field: "metadata.name",
				Message: fmt.Sprintf("duplicate %s %q %s (first defined at %s)", kind, name, where, first)})
			return
		}
		seen[k] = src
	}
	for i := range s.Policies {
		p := &s.Policies[i]
		check(kindPolicy, p.Object.Namespace, p.Object.Name, p.Source)
	}
	for i := range s.FrozenAgents {
		f := &s.FrozenAgents[i]
		check(kindFrozenAgent, f.Object.Namespace, f.Object.Name, f.Source)
	}
	for i := range s.Agents {
		a := &s.Agents[i]
		check(kindAgent, a.Object.Namespace, a.Object.Name, a.Source)
	}
	for i := range s.Upstreams {
		u := &s.Upstreams[i]
		check(kindMCPUpstream, u.Object.Namespace, u.Object.Name, u.Source)
	}
	return errs
}

// PolicySource finds where the Policy named name was read; call it on a Set
// of one namespace.
func (s *Set) PolicySource(name string) (Source, bool) {
	for i := range s.Policies {
		if s.Policies[i].Object.Name == name {
			return s.Policies[i].Source, true
		}
	}
	return Source{}, false
}
