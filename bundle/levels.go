package bundle

import (
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

// Sources are everything one namespace's bundle is built from: its own
// objects, and the cluster-scoped ones, all of them (BuildSources selects
// those whose namespaceSelector matches Labels).
type Sources struct {
	// Labels are the namespace's labels; nil leaves them out of the
	// bundle (an offline build that was given none).
	Labels              map[string]string
	Policies            []v1alpha1.Policy
	FrozenAgents        []v1alpha1.FrozenAgent
	Exceptions          []v1alpha1.PolicyException
	ClusterPolicies     []v1alpha1.ClusterPolicy
	ClusterFrozenAgents []v1alpha1.ClusterFrozenAgent
}

// Exception states: why a PolicyException is not in the bundle, or
// ExceptionApplied when it is.
// They are the Ready reasons the operator writes on the PolicyException.
const (
	ExceptionApplied        = v1alpha1.ReasonApplied
	ExceptionExpired        = v1alpha1.ReasonExpired
	ExceptionPolicyNotFound = v1alpha1.ReasonPolicyNotFound
	ExceptionsNotAllowed    = v1alpha1.ReasonExceptionsNotAllowed
)

// ExceptionState is what became of one PolicyException: its Reason (one of
// the Exception* states) and a sentence for its status.
type ExceptionState struct {
	Reason  string
	Message string
}

// BuildSources converts one namespace's sources into an engine bundle, as
// Build does, adding the ClusterPolicies and ClusterFrozenAgents that
// select the namespace, its PolicyExceptions in force at now (a zero now
// keeps every one), and its labels. It says, per PolicyException name,
// whether it was compiled in and, if not, why.
func BuildSources(s Sources, now time.Time) (engine.Bundle, map[string]ExceptionState) {
	frozen := s.FrozenAgents
	for i := range s.ClusterFrozenAgents {
		cf := &s.ClusterFrozenAgents[i]
		if Selects(cf.Spec.NamespaceSelector, s.Labels) {
			frozen = append(frozen[:len(frozen):len(frozen)], v1alpha1.FrozenAgent{ObjectMeta: cf.ObjectMeta, Spec: cf.Spec.FrozenAgentSpec})
		}
	}
	b := Build(s.Policies, frozen, now)
	cluster := map[string]*v1alpha1.ClusterPolicy{}
	for i := range s.ClusterPolicies {
		cp := &s.ClusterPolicies[i]
		if !Selects(cp.Spec.NamespaceSelector, s.Labels) {
			continue
		}
		cluster[cp.Name] = cp
		b.Policies = append(b.Policies, ClusterPolicy(cp))
	}
	local := map[string]bool{}
	for i := range s.Policies {
		local[s.Policies[i].Name] = true
	}
	states := make(map[string]ExceptionState, len(s.Exceptions))
	for i := range s.Exceptions {
		pe := &s.Exceptions[i]
		st := exceptionState(pe, local, cluster, now)
		states[pe.Name] = st
		if st.Reason == ExceptionApplied {
			b.Exceptions = append(b.Exceptions, Exception(pe))
		}
	}
	if s.Labels != nil {
		b.NamespaceLabels = maps.Clone(s.Labels)
	}
	b.Sort()
	b.SchemaVersion = b.NeededSchemaVersion()
	return b, states
}

func exceptionState(pe *v1alpha1.PolicyException, local map[string]bool, cluster map[string]*v1alpha1.ClusterPolicy, now time.Time) ExceptionState {
	ref := pe.Spec.PolicyRef
	if !now.IsZero() && !now.Before(pe.Spec.ExpiresAt.Time) {
		return ExceptionState{ExceptionExpired, fmt.Sprintf("expired at %s", pe.Spec.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	if ref.Kind == v1alpha1.PolicyKindClusterPolicy {
		cp, ok := cluster[ref.Name]
		switch {
		case !ok:
			return ExceptionState{ExceptionPolicyNotFound, fmt.Sprintf("no ClusterPolicy %q selects this namespace", ref.Name)}
		case !cp.Spec.AllowExceptions:
			return ExceptionState{ExceptionsNotAllowed, fmt.Sprintf("ClusterPolicy %q does not set allowExceptions: true", ref.Name)}
		}
		return ExceptionState{ExceptionApplied, "in force"}
	}
	if !local[ref.Name] {
		return ExceptionState{ExceptionPolicyNotFound, fmt.Sprintf("no Policy %q in this namespace", ref.Name)}
	}
	return ExceptionState{ExceptionApplied, "in force"}
}

// ClusterPolicy converts one ClusterPolicy: a Policy at the cluster level.
func ClusterPolicy(cp *v1alpha1.ClusterPolicy) engine.Policy {
	p := Policy(&v1alpha1.Policy{ObjectMeta: cp.ObjectMeta, Spec: cp.Spec.PolicySpec})
	p.Kind = engine.KindClusterPolicy
	return p
}

// Exception converts one PolicyException.
func Exception(pe *v1alpha1.PolicyException) engine.Exception {
	e := engine.Exception{Name: pe.Name, Policy: pe.Spec.PolicyRef.Name, RuleIDs: pe.Spec.RuleIDs,
		AgentIDs: pe.Spec.Agents.AgentIDs, ServiceAccounts: pe.Spec.Agents.ServiceAccounts,
		ExpiresAt: pe.Spec.ExpiresAt.UTC()}
	if pe.Spec.PolicyRef.Kind == v1alpha1.PolicyKindClusterPolicy {
		e.PolicyKind = engine.KindClusterPolicy
	}
	return e
}

// Selects tells whether a namespaceSelector chooses a namespace with these
// labels: an absent or empty selector chooses every namespace. A selector
// that does not parse (the API server does not check its operators)
// chooses every namespace too: a guardrail or a freeze that cannot be read
// applies rather than lapses; the webhook refuses such a ClusterPolicy and
// the operator's status names the error (SelectorError).
func Selects(sel *metav1.LabelSelector, nsLabels map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return true
	}
	return s.Matches(labels.Set(nsLabels))
}

// SelectorError is why sel does not parse, or nil.
func SelectorError(sel *metav1.LabelSelector) error {
	if sel == nil {
		return nil
	}
	_, err := metav1.LabelSelectorAsSelector(sel)
	return err
}
