package manifest

import (
	"io"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// LoadBundle is the bundle the operator would publish for the manifests at
// paths ("-" reads in): it loads them (Load), keeps one namespace's
// objects (OneNamespace: namespace, or else the one namespace they name)
// and builds those at now with bundle.Build, the operator's own function.
// The Set is what the bundle was built from, to locate diagnostics. Any
// error of Load or OneNamespace is returned as it is.
func LoadBundle(paths []string, in io.Reader, namespace string, now time.Time) (*Set, engine.Bundle, error) {
	return LoadNamespaceBundle(paths, in, namespace, nil, now)
}

// LoadNamespaceBundle is LoadBundle for a namespace with labels, as the
// operator reads them off the Namespace (toolgate.dev/enforce,
// toolgate.dev/environment, and what ClusterPolicies' and
// ClusterFrozenAgents' namespaceSelectors match). The bundle holds the
// ClusterPolicies and ClusterFrozenAgents that select the namespace and
// its PolicyExceptions in force at now, as the operator would publish it.
func LoadNamespaceBundle(paths []string, in io.Reader, namespace string, labels map[string]string, now time.Time) (*Set, engine.Bundle, error) {
	all, err := Load(paths, in)
	if err != nil {
		return nil, engine.Bundle{}, err
	}
	set, err := all.OneNamespace(namespace)
	if err != nil {
		return nil, engine.Bundle{}, err
	}
	b, _ := bundle.BuildSources(set.Sources(labels), now)
	reg := set.Registration()
	reg.Labels = labels
	bundle.Register(&b, reg)
	return set, b, nil
}
