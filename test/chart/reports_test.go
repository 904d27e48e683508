package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestChartReportCRDsAreGenerated fails when the chart's report CRDs are not
// what hack/chart-reports-crds.sh makes of config/reports-crds.
func TestChartReportCRDsAreGenerated(t *testing.T) {
	t.Parallel()
	fresh := filepath.Join(t.TempDir(), "reports-crds.yaml")
	if out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "chart-reports-crds.sh"), fresh).CombinedOutput(); err != nil {
		t.Fatalf("hack/chart-reports-crds.sh: %v\n%s", err, out)
	}
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(testenv.ChartDir(), "templates", "reports-crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("charts/toolgate/templates/reports-crds.yaml is stale: run hack/chart-reports-crds.sh")
	}
}

// TestReportsAreOffByDefault: no endpoint, Service, CRD or permission for
// reports unless reports.enabled.
func TestReportsAreOffByDefault(t *testing.T) {
	t.Parallel()
	objs := render(t)
	if _, ok := flagValue(managerArgs(t, objs), "reports"); ok {
		t.Error("the manager gets --reports by default")
	}
	for _, o := range objs {
		if o.GetKind() == "Service" && strings.HasSuffix(o.GetName(), "-reports") {
			t.Errorf("Service %s rendered by default", o.GetName())
		}
		if o.GetKind() == "CustomResourceDefinition" && !strings.HasSuffix(o.GetName(), ".toolgate.dev") {
			t.Errorf("CRD %s rendered by default", o.GetName())
		}
	}
	for _, r := range typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "toolgate-manager")).Rules {
		if slices.Contains(r.Resources, "tokenreviews") || slices.Contains(r.Resources, "reports") {
			t.Errorf("the manager may %v %v by default", r.Verbs, r.Resources)
		}
	}
}

// TestReportsRender: with reports.enabled the manager receives and writes
// reports of the chosen format, injected sidecars send to the Service that
// selects the receiving leader, and the report CRD of that format (only)
// renders when installCRDs is set, equal to config/reports-crds but for the
// chart's labels and the keep annotation.
func TestReportsRender(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"openreports", "wgpolicyk8s"} {
		objs := render(t, "--set", "reports.enabled=true", "--set", "reports.format="+format)
		args := managerArgs(t, objs)
		for flag, want := range map[string]string{
			"reports-format": format, "reports-window": "1h", "reports-listen": ":8090",
			"reports-sidecar-url": "http://toolgate-reports.toolgate-system.svc:8090" + v1alpha1.ReportsPath,
		} {
			if got, _ := flagValue(args, flag); got != want {
				t.Errorf("%s: --%s=%q, want %q", format, flag, got, want)
			}
		}
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ""))
		c := d.Spec.Template.Spec.Containers[0]
		if containerPort(t, &c, "reports") != 8090 {
			t.Errorf("%s: the reports port is not 8090", format)
		}
		svc := typed[corev1.Service](t, find(t, objs, "Service", "toolgate-reports"))
		others := map[string]string{}
		for k, v := range svc.Spec.Selector {
			if k != v1alpha1.LabelReportsReceiver {
				others[k] = v
			}
		}
		if svc.Spec.Selector[v1alpha1.LabelReportsReceiver] != "true" || !selects(t, others, d) {
			t.Errorf("%s: the reports Service selects %v, not the labelled leader", format, svc.Spec.Selector)
		}
		if svc.Spec.Ports[0].TargetPort.StrVal != "reports" {
			t.Errorf("%s: the Service targets %v", format, svc.Spec.Ports[0].TargetPort)
		}
		crds := map[string]*unstructured.Unstructured{}
		for _, o := range all(objs, "CustomResourceDefinition") {
			if !strings.HasSuffix(o.GetName(), ".toolgate.dev") {
				crds[o.GetName()] = o
			}
		}
		want := map[string]string{"openreports": "reports.openreports.io", "wgpolicyk8s": "policyreports.wgpolicyk8s.io"}[format]
		if len(crds) != 1 || crds[want] == nil {
			t.Fatalf("%s: report CRDs %v, want %s only", format, keys(crds), want)
		}
		base := reportCRD(t, want)
		got := crds[want].DeepCopy()
		if got.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s: the CRD is not kept on uninstall", want)
		}
		got.SetAnnotations(nil)
		got.SetLabels(nil)
		if !reflect.DeepEqual(got.Object, base.Object) {
			t.Errorf("%s differs from config/reports-crds beyond labels and the keep annotation", want)
		}
		var tokenReviews, writes bool
		for _, r := range typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "toolgate-manager")).Rules {
			tokenReviews = tokenReviews || slices.Contains(r.Resources, "tokenreviews") && slices.Contains(r.Verbs, "create")
			writes = writes || slices.Contains(r.Resources, strings.Split(want, ".")[0]) && slices.Contains(r.Verbs, "patch")
		}
		if !tokenReviews || !writes {
			t.Errorf("%s: the manager may create TokenReviews %v, patch %s %v", format, tokenReviews, want, writes)
		}
		none := render(t, "--set", "reports.enabled=true", "--set", "reports.format="+format, "--set", "reports.installCRDs=false")
		for _, o := range all(none, "CustomResourceDefinition") {
			if !strings.HasSuffix(o.GetName(), ".toolgate.dev") {
				t.Errorf("%s: reports.installCRDs=false rendered %s", format, o.GetName())
			}
		}
	}
	// Without injection the manager still receives (sidecars set up by
	// hand), but no sidecar is told where.
	args := managerArgs(t, render(t, "--set", "reports.enabled=true", "--set", "sidecarInjection.enabled=false"))
	if _, ok := flagValue(args, "reports-sidecar-url"); ok {
		t.Error("--reports-sidecar-url without injection")
	}
}

func reportCRD(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "reports-crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeObjects(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetName() == name {
				return o
			}
		}
	}
	t.Fatalf("no %s in config/reports-crds", name)
	return nil
}

// TestReportsRBAC asks the API server, about the installed chart's
// manager: with reports on it may create TokenReviews, write the chosen
// report kind in the namespaces it watches (and not the other kind, nor
// outside them), and patch Pods in its own namespace only (the receiver
// label); with reports off, none of that.
func TestReportsRBAC(t *testing.T) {
	t.Parallel()
	const watched, other = "reports-rbac-team-a", "reports-rbac-team-b"
	createNamespace(t, watched)
	createNamespace(t, other)
	m := installRBAC(t, renderAs(t, "rbac-reports", "rbac-reports-system",
		"--set", "reports.enabled=true", "--set", "reports.format=wgpolicyk8s", "--set", "manager.namespaces={"+watched+"}"))
	for _, a := range []access{
		{"create", "authentication.k8s.io", "tokenreviews", "", ""},
		{"patch", "wgpolicyk8s.io", "policyreports", watched, v1alpha1.ReportName},
		{"create", "wgpolicyk8s.io", "policyreports", watched, ""},
		{"get", "wgpolicyk8s.io", "policyreports", watched, v1alpha1.ReportName},
		{"patch", "", "pods", m.namespace, "rbac-reports-toolgate-manager-0"},
	} {
		if !canEventually(t, m, a.verb, a.group, a.resource, a.namespace, a.name) {
			t.Errorf("with reports on, %s cannot %s %s.%s %q in %q", m.user(), a.verb, a.resource, a.group, a.name, a.namespace)
		}
	}
	requireDenied(t, m, []access{
		{"patch", "wgpolicyk8s.io", "policyreports", other, v1alpha1.ReportName},
		{"patch", "openreports.io", "reports", watched, v1alpha1.ReportName},
		{"patch", "", "pods", watched, "agent-0"},
		{"delete", "", "pods", m.namespace, "rbac-reports-toolgate-manager-0"},
	})

	off := installRBAC(t, renderAs(t, "rbac-noreports", "rbac-noreports-system", "--set", "manager.namespaces={"+watched+"}"))
	requireDenied(t, off, []access{
		{"create", "authentication.k8s.io", "tokenreviews", "", ""},
		{"patch", "openreports.io", "reports", watched, v1alpha1.ReportName},
		{"patch", "", "pods", off.namespace, "rbac-noreports-toolgate-manager-0"},
	})
}
