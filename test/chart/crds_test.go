package chart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestChartCRDsAreGenerated fails when charts/toolgate/templates/crds is not
// what hack/chart-crds.sh makes of config/crd/bases: run that script.
func TestChartCRDsAreGenerated(t *testing.T) {
	t.Parallel()
	fresh := t.TempDir()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "chart-crds.sh"), fresh)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/chart-crds.sh: %v\n%s", err, out)
	}
	committed := filepath.Join(testenv.ChartDir(), "templates", "crds")
	want, got := readDir(t, fresh), readDir(t, committed)
	for name, content := range want {
		if !bytes.Equal(got[name], content) {
			t.Errorf("%s is stale or missing in the chart: run hack/chart-crds.sh", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s in the chart has no source in config/crd/bases: run hack/chart-crds.sh", name)
		}
	}
	if len(want) == 0 {
		t.Fatal("hack/chart-crds.sh wrote nothing")
	}
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// TestRenderedCRDsEqualGenerated: rendering adds labels and, with crds.keep,
// the keep annotation, and changes nothing else.
func TestRenderedCRDsEqualGenerated(t *testing.T) {
	t.Parallel()
	bases := generatedCRDs(t)
	for _, keep := range []bool{true, false} {
		args := []string{"--set", "crds.keep=" + map[bool]string{true: "true", false: "false"}[keep]}
		crds := all(render(t, args...), "CustomResourceDefinition")
		if len(crds) != len(bases) {
			t.Fatalf("crds.keep=%v: rendered %d CRDs, config/crd/bases has %d", keep, len(crds), len(bases))
		}
		for _, crd := range crds {
			base, ok := bases[crd.GetName()]
			if !ok {
				t.Errorf("rendered CRD %s is not in config/crd/bases", crd.GetName())
				continue
			}
			annotations := crd.GetAnnotations()
			if got := annotations["helm.sh/resource-policy"]; (got == "keep") != keep {
				t.Errorf("crds.keep=%v: %s has helm.sh/resource-policy %q", keep, crd.GetName(), got)
			}
			if crd.GetLabels()["app.kubernetes.io/part-of"] != "toolgate" {
				t.Errorf("%s lacks the chart labels: %v", crd.GetName(), crd.GetLabels())
			}
			c := crd.DeepCopy()
			delete(annotations, "helm.sh/resource-policy")
			c.SetAnnotations(annotations)
			c.SetLabels(nil)
			if !reflect.DeepEqual(c.Object, base.Object) {
				t.Errorf("%s differs from config/crd/bases beyond labels and the keep annotation", crd.GetName())
			}
		}
	}
	if n := len(all(render(t, "--set", "crds.enabled=false"), "CustomResourceDefinition")); n != 0 {
		t.Errorf("crds.enabled=false rendered %d CRDs", n)
	}
}

func generatedCRDs(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for name, raw := range readDir(t, testenv.CRDDir()) {
		objs, err := decodeObjects(string(raw))
		if err != nil || len(objs) != 1 {
			t.Fatalf("%s: %d objects, %v", name, len(objs), err)
		}
		out[objs[0].GetName()] = objs[0]
	}
	return out
}
