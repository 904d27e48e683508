package chart

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/internal/testenv"
)

const fieldOwner = "toolgate-chart-test"

// TestRenderedObjectsAreAccepted: the API server accepts every object the
// chart renders, with default and with non-default values. Server-side
// apply rejects unknown and mistyped fields, and runs admission and
// validation; dry-run persists nothing.
func TestRenderedObjectsAreAccepted(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{"default": nil, "non-default": nonDefault} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			objs := render(t, args...)
			ensureNamespaces(t, objs)
			dryRunApply(t, objs)
		})
	}
}

// TestKustomizeObjectsAreAccepted does the same for config/default.
func TestKustomizeObjectsAreAccepted(t *testing.T) {
	t.Parallel()
	objs := kustomize(t, "config/default")
	ensureNamespaces(t, objs)
	dryRunApply(t, objs)
}

// kustomize builds a config/ directory with kubectl, which embeds
// kustomize. kubectl comes with the machine image; it is required.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is required to build the kustomize tree (apt-get install kubectl): %v", err)
	}
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderrOf(err))
	}
	objs, err := decodeObjects(string(out))
	if err != nil {
		t.Fatalf("decoding kubectl kustomize %s: %v", dir, err)
	}
	return objs
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// ensureNamespaces creates, for real, every namespace the objects live in:
// a dry-run create of a Namespace does not make it exist for the others.
func ensureNamespaces(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	seen := map[string]bool{}
	for _, o := range objs {
		ns := o.GetNamespace()
		if o.GetKind() == "Namespace" {
			ns = o.GetName()
		}
		if ns == "" || seen[ns] {
			continue
		}
		seen[ns] = true
		createNamespace(t, ns)
	}
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatal("nothing to apply")
	}
	for _, o := range objs {
		if err := apply(o, true); err != nil {
			t.Errorf("%s %s/%s rejected: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// apply server-side applies o, as a dry run or for real.
func apply(o *unstructured.Unstructured, dryRun bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := &client.ApplyOptions{FieldManager: fieldOwner, Force: ptr.To(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts); err != nil {
		return fmt.Errorf("apply (dry run %v): %w", dryRun, err)
	}
	return nil
}

// TestDryRunRejectsBrokenObjects is the control for the two tests above: the
// same path refuses a misspelled field and an invalid value.
func TestDryRunRejectsBrokenObjects(t *testing.T) {
	t.Parallel()
	objs := render(t)
	ensureNamespaces(t, objs)
	d := find(t, objs, "Deployment", "").DeepCopy()
	if err := unstructured.SetNestedField(d.Object, int64(2), "spec", "replicaz"); err != nil {
		t.Fatal(err)
	}
	if err := apply(d, true); err == nil {
		t.Error("a Deployment with spec.replicaz was accepted")
	}
	w := find(t, objs, "ValidatingWebhookConfiguration", "").DeepCopy()
	hooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
	hooks[0].(map[string]any)["sideEffects"] = "Some"
	if err := unstructured.SetNestedSlice(w.Object, hooks, "webhooks"); err != nil {
		t.Fatal(err)
	}
	if err := apply(w, true); err == nil {
		t.Error("a webhook with sideEffects Some (not allowed in admissionregistration/v1) was accepted")
	}
}
