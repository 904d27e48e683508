package manifest

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// ClusterPolicy is a loaded ClusterPolicy and where it came from.
type ClusterPolicy struct {
	Object v1alpha1.ClusterPolicy
	Source Source
}

// ClusterFrozenAgent is a loaded ClusterFrozenAgent and where it came from.
type ClusterFrozenAgent struct {
	Object v1alpha1.ClusterFrozenAgent
	Source Source
}

// PolicyException is a loaded PolicyException and where it came from.
type PolicyException struct {
	Object v1alpha1.PolicyException
	Source Source
}

// entry is what every loaded object has: its metadata and where it came
// from, so that a walk over the Set's objects is written once.
type entry interface {
	meta() *metav1.ObjectMeta
	source() Source
}

func (p *Policy) meta() *metav1.ObjectMeta      { return &p.Object.ObjectMeta }
func (p *Policy) source() Source                { return p.Source }
func (f *FrozenAgent) meta() *metav1.ObjectMeta { return &f.Object.ObjectMeta }
func (f *FrozenAgent) source() Source           { return f.Source }
func (a *Agent) meta() *metav1.ObjectMeta       { return &a.Object.ObjectMeta }
func (a *Agent) source() Source                 { return a.Source }
func (u *MCPUpstream) meta() *metav1.ObjectMeta { return &u.Object.ObjectMeta }
func (u *MCPUpstream) source() Source           { return u.Source }

func (p *ClusterPolicy) meta() *metav1.ObjectMeta      { return &p.Object.ObjectMeta }
func (p *ClusterPolicy) source() Source                { return p.Source }
func (f *ClusterFrozenAgent) meta() *metav1.ObjectMeta { return &f.Object.ObjectMeta }
func (f *ClusterFrozenAgent) source() Source           { return f.Source }
func (e *PolicyException) meta() *metav1.ObjectMeta    { return &e.Object.ObjectMeta }
func (e *PolicyException) source() Source              { return e.Source }

// each calls f with every object and its kind, kind by kind in input order.
func (s *Set) each(f func(kind string, e entry)) {
	for i := range s.Policies {
		f(kindPolicy, &s.Policies[i])
	}
	for i := range s.FrozenAgents {
		f(kindFrozenAgent, &s.FrozenAgents[i])
	}
	for i := range s.Agents {
		f(kindAgent, &s.Agents[i])
	}
	for i := range s.Upstreams {
		f(kindMCPUpstream, &s.Upstreams[i])
	}
	for i := range s.ClusterPolicies {
		f(kindClusterPolicy, &s.ClusterPolicies[i])
	}
	for i := range s.ClusterFrozenAgents {
		f(kindClusterFrozenAgent, &s.ClusterFrozenAgents[i])
	}
	for i := range s.Exceptions {
		f(kindPolicyException, &s.Exceptions[i])
	}
}

// inNamespace are the items that would live in ns (naming it or no
// namespace), as copies that name it.
func inNamespace[T any, P interface {
	*T
	entry
}](items []T, ns string) []T {
	var out []T
	for _, it := range items {
		if m := P(&it).meta(); m.Namespace == "" || m.Namespace == ns {
			m.Namespace = ns
			out = append(out, it)
		}
	}
	return out
}

// Set is the objects read from some paths, in input order.
type Set struct {
	Policies     []Policy
	FrozenAgents []FrozenAgent
	Agents       []Agent
	Upstreams    []MCPUpstream
	// ClusterPolicies and ClusterFrozenAgents belong to no namespace: every
	// namespace's set holds them all, and the bundle builder selects those
	// whose namespaceSelector matches the namespace's labels.
	ClusterPolicies     []ClusterPolicy
	ClusterFrozenAgents []ClusterFrozenAgent
	Exceptions          []PolicyException
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
	return len(s.Policies) + len(s.FrozenAgents) + len(s.Agents) + len(s.Upstreams) +
		len(s.ClusterPolicies) + len(s.ClusterFrozenAgents) + len(s.Exceptions)
}

// Sources are the objects a namespace's bundle is built from, with the
// namespace's labels (nil: not known), for bundle.BuildSources.
func (s *Set) Sources(labels map[string]string) bundle.Sources {
	src := bundle.Sources{Labels: labels, Policies: s.PolicyObjects(), FrozenAgents: s.FrozenAgentObjects()}
	for i := range s.ClusterPolicies {
		src.ClusterPolicies = append(src.ClusterPolicies, s.ClusterPolicies[i].Object)
	}
	for i := range s.ClusterFrozenAgents {
		src.ClusterFrozenAgents = append(src.ClusterFrozenAgents, s.ClusterFrozenAgents[i].Object)
	}
	for i := range s.Exceptions {
		src.Exceptions = append(src.Exceptions, s.Exceptions[i].Object)
	}
	return src
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
	s.each(func(_ string, e entry) { add(e.meta().Namespace) })
	slices.Sort(out)
	return out
}

// InNamespace returns the objects that would live in ns: those naming it and
// those naming no namespace, which get ns. An empty ns keeps everything as is.
func (s *Set) InNamespace(ns string) *Set {
	cluster := &Set{ClusterPolicies: slices.Clone(s.ClusterPolicies), ClusterFrozenAgents: slices.Clone(s.ClusterFrozenAgents)}
	if ns == "" {
		cluster.Policies, cluster.FrozenAgents = slices.Clone(s.Policies), slices.Clone(s.FrozenAgents)
		cluster.Agents, cluster.Upstreams, cluster.Exceptions = slices.Clone(s.Agents), slices.Clone(s.Upstreams), slices.Clone(s.Exceptions)
		return cluster
	}
	cluster.Policies, cluster.FrozenAgents = inNamespace(s.Policies, ns), inNamespace(s.FrozenAgents, ns)
	cluster.Agents, cluster.Upstreams = inNamespace(s.Agents, ns), inNamespace(s.Upstreams, ns)
	cluster.Exceptions = inNamespace(s.Exceptions, ns)
	return cluster
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
	s.each(func(kind string, e entry) { check(kind, e.meta().Namespace, e.meta().Name, e.source()) })
	return errs
}

// PolicySource finds where the Policy (kind "Policy") or ClusterPolicy
// (kind "ClusterPolicy") named name was read; call it on a Set of one
// namespace.
func (s *Set) PolicySource(kind, name string) (Source, bool) {
	if kind != kindClusterPolicy {
		for i := range s.Policies {
			if s.Policies[i].Object.Name == name {
				return s.Policies[i].Source, true
			}
		}
		return Source{}, false
	}
	for i := range s.ClusterPolicies {
		if s.ClusterPolicies[i].Object.Name == name {
			return s.ClusterPolicies[i].Source, true
		}
	}
	return Source{}, false
}
