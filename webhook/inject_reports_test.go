package webhook

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	args := expand(c.Args[1:], map[string]string{"POD_NAMESPACE": ns, "POD_NAME": p.Name, "POD_UID": "0d6e1c2a-5b7f-4e3a-9c1d-2f4b6a8c0e13", "TOOLGATE_AGENT_ID": "agent-sa"})
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

	// The API server takes the Pod as injected, the projected token
	// included (without the annotation, so the webhook lets it be).
	asInjected := p.DeepCopy()
	delete(asInjected.Annotations, v1alpha1.AnnotationInject)
	if err := k8sClient.Create(context.Background(), asInjected, client.DryRunAll); err != nil {
		t.Errorf("the API server refuses the injected Pod: %v", err)
	}

	// Through the API server and the webhook (as configured in this
	// suite, without reports): an agent container may not mount the
	// reports token, nor a Pod declare a volume of its name.
	thief := pod("reports-thief", map[string]string{v1alpha1.AnnotationInject: "true"})
	thief.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: reportsTokenVolumeName, MountPath: "/stolen"}}
	thief.Spec.Volumes = []corev1.Volume{{Name: reportsTokenVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	err := k8sClient.Create(context.Background(), thief, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "reports endpoint") {
		t.Errorf("a Pod holding the reports token's volume name: %v", err)
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
