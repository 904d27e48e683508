package bundlesource

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Source is the one place a sidecar's bundles come from: a ConfigMap
// watched through the API (with the FrozenAgents of its namespace), a
// mounted ConfigMap volume, or a bundle document on disk. Run loads what it
// finds into l until ctx ends.
type Source interface {
	Run(ctx context.Context, l *Loader) error
}

// NewSource makes the source cfg names: ConfigMap, else BundleDir, else
// BundleFile. A ConfigMap source needs API access (Kubeconfig, KUBECONFIG
// or in-cluster), checked here.
func NewSource(cfg Config) (Source, error) {
	switch {
	case cfg.ConfigMap != "":
		return newConfigMapSource(cfg.ConfigMap, cfg.Kubeconfig)
	case cfg.BundleDir != "":
		return newDirSource(cfg.BundleDir, cfg.PollInterval), nil
	default:
		return newFileSource(cfg.BundleFile, cfg.PollInterval), nil
	}
}

// ParseConfigMapRef splits NAMESPACE/NAME and checks both are valid names.
func ParseConfigMapRef(ref string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q is not NAMESPACE/NAME", ref)
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return "", "", fmt.Errorf("namespace %q: %s", namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", "", fmt.Errorf("name %q: %s", name, strings.Join(msgs, "; "))
	}
	return namespace, name, nil
}
