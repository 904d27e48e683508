package chart

import (
	"os"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/toolgate/toolgate/manager"
)

// TestManifestArgsAreAcceptedByTheManager parses the rendered manager args
// with the real `toolgate manager` command and validates them with its own
// Options.Validate, so a renamed or mistyped flag fails here and not in a
// crash-looping pod. Not parallel: it sets POD_NAMESPACE as the downward API
// would.
func TestManifestArgsAreAcceptedByTheManager(t *testing.T) {
	for name, objs := range map[string]func(*testing.T) []*unstructured.Unstructured{
		"chart default":     func(t *testing.T) []*unstructured.Unstructured { return render(t) },
		"chart non-default": func(t *testing.T) []*unstructured.Unstructured { return render(t, nonDefault...) },
		"chart without injection or leader election": func(t *testing.T) []*unstructured.Unstructured {
			return render(t, "--set", "sidecarInjection.enabled=false", "--set", "leaderElection.enabled=false", "--set", "replicaCount=1")
		},
		"kustomize": func(t *testing.T) []*unstructured.Unstructured { return kustomize(t, "config/default") },
	} {
		t.Run(name, func(t *testing.T) {
			d := typed[appsv1.Deployment](t, find(t, objs(t), "Deployment", ""))
			c := d.Spec.Template.Spec.Containers[0]
			if len(c.Args) == 0 || c.Args[0] != "manager" {
				t.Fatalf("args %q do not start with the manager subcommand", c.Args)
			}
			args := c.Args[1:]
			setDownwardEnv(t, c.Env, d.Namespace)

			// Every flag, zap's included, exists in the real command.
			if err := manager.NewCommand().Flags().Parse(args); err != nil {
				t.Fatalf("toolgate manager rejects %q: %v", args, err)
			}
			// And the values pass the manager's own validation.
			o := manager.DefaultOptions()
			fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
			fs.ParseErrorsAllowlist.UnknownFlags = true // zap's, checked above
			o.AddFlags(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := o.Validate(); err != nil {
				t.Errorf("toolgate manager %q: %v", args, err)
			}
		})
	}
}

// setDownwardEnv sets the container's downward-API metadata.namespace
// variables to namespace, as the kubelet would.
func setDownwardEnv(t *testing.T, env []corev1.EnvVar, namespace string) {
	t.Helper()
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			t.Setenv(e.Name, namespace)
		}
	}
	if os.Getenv("POD_NAMESPACE") == "" {
		t.Error("the manager container does not get POD_NAMESPACE")
	}
}
