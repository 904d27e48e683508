package webhook

import (
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/sidecar"
)

// expand does what kubelet does to $(VAR) in args, with the values the
// downward API would give.
func expand(args []string, env map[string]string) []string {
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = ref.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	return out
}

// The args the injector writes, as stored by the API server and expanded
// as kubelet would, are accepted by the real `toolgate sidecar` command's
// flags and validation: a renamed flag fails here, not in a crash-looping
// agent pod. The bundle source is swapped for a file so nothing connects.
func TestInjectedArgsAreAcceptedByTheSidecar(t *testing.T) {
	p := pod("agent-args", map[string]string{v1alpha1.AnnotationInject: "true", v1alpha1.AnnotationAgentID: "bot-7",
		v1alpha1.AnnotationRoles: "ci,analyst:eu", v1alpha1.AnnotationEnvironment: "prod"})
	stored := admit(t, p)
	c := sidecarOf(t, &stored)
	if c == nil || len(c.Args) == 0 || c.Args[0] != "sidecar" {
		t.Fatalf("sidecar container %+v", c)
	}
	env := map[string]string{"POD_NAMESPACE": stored.Namespace, "POD_NAME": stored.Name, "POD_UID": string(stored.UID), "TOOLGATE_AGENT_ID": "bot-7"}
	args := expand(c.Args[1:], env)
	for _, a := range args {
		if strings.Contains(a, "$(") {
			t.Errorf("arg %q references a variable the container does not define", a)
		}
	}

	// The real command's flag set takes every arg...
	if err := sidecar.NewCommand("test").ParseFlags(args); err != nil {
		t.Fatalf("toolgate sidecar rejects %q: %v", args, err)
	}
	// ...and the values pass its own validation.
	o := sidecar.DefaultOptions()
	fs := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("toolgate sidecar %q: %v", args, err)
	}
	if o.ConfigMap != ns+"/toolgate-bundle" || o.AgentID != "bot-7" || o.MetricsListen != ":9191" ||
		!slices.Equal(o.Listen, []string{"unix:///var/run/toolgate/toolgate.sock", "127.0.0.1:8181"}) {
		t.Errorf("configmap %q agent %q listen %q metrics %q", o.ConfigMap, o.AgentID, o.Listen, o.MetricsListen)
	}
	if !slices.Equal(o.Roles, []string{"ci", "analyst:eu"}) || o.Environment != "prod" {
		t.Errorf("roles %q environment %q, want [ci analyst:eu] and prod", o.Roles, o.Environment)
	}
	if o.LeasePod != "agent-args" || o.LeasePodUID != string(stored.UID) || stored.UID == "" {
		t.Errorf("lease pod %q uid %q, want agent-args and %q", o.LeasePod, o.LeasePodUID, stored.UID)
	}
	want := []string{"namespace=" + ns, "pod=agent-args", "cluster=test-cluster"}
	if !slices.Equal(o.LogLabels, want) {
		t.Errorf("decision log labels %q, want %q", o.LogLabels, want)
	}

	// The exec probes name the binary the image installs and a subcommand
	// the real command has, with flags and arguments it accepts.
	for _, pr := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		argv := pr.Exec.Command
		if argv[0] != SidecarBinary {
			t.Errorf("probe runs %q, not %s", argv[0], SidecarBinary)
		}
		root := &cobra.Command{Use: "toolgate"}
		root.AddCommand(sidecar.NewCommand("test"))
		sub, rest, err := root.Find(argv[1:])
		if err != nil || sub.Name() != "probe" {
			t.Fatalf("probe %q: found %v, %v", argv, sub.Name(), err)
		}
		if err := sub.ParseFlags(rest); err != nil {
			t.Errorf("probe %q: %v", argv, err)
		}
		if err := sub.ValidateArgs(sub.Flags().Args()); err != nil {
			t.Errorf("probe %q: %v", argv, err)
		}
	}
}
