package webhook

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// +kubebuilder:rbac:groups=toolgate.dev,resources=agents;mcpupstreams,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// registered is who an injected Pod's agent is in a namespace that
// registers its agents: its Agent, and the MCPUpstreams it asked for,
// resolved from objects the namespace's admins wrote. The Pod's
// annotations then choose nothing but which of the Agent's upstreams to
// reach.
type registered struct {
	agent       engine.Agent
	environment string
	upstreams   []mcpAnnotated
}

// resolveRegistered finds the Pod's Agent (its ServiceAccount's) and the
// upstreams its annotation names, refusing what the namespace's admins did
// not register: no Agent for the ServiceAccount, an upstream written
// inline (NAME=URL), one the Agent does not list, or one with no
// MCPUpstream.
func resolveRegistered(pod *corev1.Pod, namespace string, reg bundle.Registration) (*registered, error) {
	sa := serviceAccount(pod)
	// The identity the operator publishes, conflicts resolved as there: the
	// Pod gets the Agent its sidecar will bind.
	id := bundle.Identity(reg)
	agent, ok := id.AgentFor(sa)
	saPath := field.NewPath("spec", "serviceAccountName")
	if !ok {
		return nil, podInvalid(pod, field.ErrorList{field.Forbidden(saPath, fmt.Sprintf(
			"ServiceAccount %q has no Agent in namespace %s, whose agents are registered (it has Agents, or the label %s=true): "+
				"an admin of the namespace must create an Agent with spec.serviceAccountName: %s before Pods may run as it",
			sa, namespace, v1alpha1.LabelEnforce, sa))})
	}
	r := &registered{agent: agent, environment: id.Environment}
	v, ok := pod.Annotations[AnnotationMCPUpstreams]
	if !ok {
		return r, nil
	}
	annotation := field.NewPath("metadata", "annotations").Key(AnnotationMCPUpstreams)
	var errs field.ErrorList
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			continue
		case strings.ContainsAny(name, "=;"):
			errs = append(errs, field.Forbidden(annotation, fmt.Sprintf(
				"%q: in a namespace whose agents are registered, upstreams are MCPUpstream objects its admins write, "+
					"and the annotation lists their names only (e.g. %s: github,jira)", redactEntry(name), AnnotationMCPUpstreams)))
			continue
		case len(validation.IsDNS1123Label(name)) > 0 || len(name) > maxMCPName:
			errs = append(errs, field.Invalid(annotation, name, fmt.Sprintf("an MCPUpstream name is a DNS label of at most %d characters", maxMCPName)))
			continue
		case !slices.Contains(agent.Upstreams, name):
			errs = append(errs, field.Forbidden(annotation, fmt.Sprintf(
				"Agent %s (ServiceAccount %s) does not list MCPUpstream %q in spec.upstreams: an admin of the namespace must add it", agent.Name, sa, name)))
			continue
		}
		i := slices.IndexFunc(reg.Upstreams, func(u v1alpha1.MCPUpstream) bool { return u.Name == name })
		if i < 0 {
			errs = append(errs, field.NotFound(annotation, fmt.Sprintf("MCPUpstream %s/%s", namespace, name)))
			continue
		}
		up := &reg.Upstreams[i]
		u := mcpAnnotated{name: name, url: up.Spec.URL}
		if ref := up.Spec.CredentialSecretRef; ref != nil {
			u.secret, u.key = ref.Name, ref.Key
			if u.key == "" {
				u.key = mcpDefaultKey
			}
		}
		r.upstreams = append(r.upstreams, u)
	}
	if len(errs) > 0 {
		return nil, podInvalid(pod, errs)
	}
	return r, nil
}

// redactEntry shows an inline entry without what may be a credential.
func redactEntry(entry string) string {
	name, raw, ok := strings.Cut(entry, "=")
	if !ok {
		return entry
	}
	raw, _, _ = strings.Cut(raw, ";")
	return name + "=" + redactURL(raw)
}
