package webhook

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/sidecar"
)

// TestInjectedSidecarReportsWithATokenForReportsOnly: with a reports URL,
// the sidecar sends its decision log there with a projected token whose
// audience is the reports endpoint's alone, mounted into the sidecar only;
// the real sidecar flags accept the args. Without one, nothing changes.
func TestInjectedSidecarReportsWithATokenForReportsOnly(t *testing.T) {
	t.Parallel()
	o := InjectOptions{Image: "toolgate:test", BundleConfigMap: "toolgate-bundle", Socket: "/var/run/toolgate/toolgate.sock",
		RunAsUser: DefaultSidecarUID, RunAsGroup: DefaultSidecarUID, Native: true,
		ReportsURL: "http://toolgate-reports.toolgate-system.svc:8090" + v1alpha1.ReportsPath}
	p := pod("reporting", map[string]string{v1alpha1.AnnotationInject: "true"})
	injectSidecar(p, o, nil)
	c := sidecarOf(t, p)
	args := expand(c.Args[1:], map[string]string{"POD_NAMESPACE": ns, "POD_NAME": p.Name, "TOOLGATE_AGENT_ID": "agent-sa"})
	so := sidecar.DefaultOptions()
	fs := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	so.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := so.Validate(); err != nil {
		t.Fatalf("toolgate sidecar %q: %v", args, err)
	}
	if so.DecisionLogURL != o.ReportsURL || so.DecisionLogTokenFile != "/var/run/secrets/toolgate/reports/token" {
		t.Errorf("decision log url %q token file %q", so.DecisionLogURL, so.DecisionLogTokenFile)
	}
	var found bool
	for _, v := range p.Spec.Volumes {
		if v.Name != reportsTokenVolumeName {
			continue
		}
		found = true
		src := v.Projected.Sources[0].ServiceAccountToken
		if src == nil || src.Audience != v1alpha1.ReportsAudience || src.Path != "token" || *src.ExpirationSeconds != 600 {
			t.Errorf("token projection %+v", src)
		}
	}
	if !found {
		t.Fatal("no reports token volume")
	}
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, ct := range list {
			for _, m := range ct.VolumeMounts {
				if m.Name == reportsTokenVolumeName && ct.Name != SidecarName {
					t.Errorf("container %s mounts the reports token", ct.Name)
				}
			}
		}
	}

	o.ReportsURL = ""
	plain := pod("not-reporting", map[string]string{v1alpha1.AnnotationInject: "true"})
	injectSidecar(plain, o, nil)
	for _, a := range sidecarOf(t, plain).Args {
		if strings.HasPrefix(a, "--decision-log-url") || strings.HasPrefix(a, "--decision-log-token-file") {
			t.Errorf("without reports the sidecar got %q", a)
		}
	}
	for _, v := range plain.Spec.Volumes {
		if v.Name == reportsTokenVolumeName {
			t.Error("without reports the Pod got the reports token")
		}
	}
}
