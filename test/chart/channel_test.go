package chart

import (
	"context"
	"strings"
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

// The channel ConfigMaps the admission policy guards: the bundle in every
// namespace, the signing keys in the manager's.
const (
	bundleName      = "toolgate-bundle"
	signingKeysName = "toolgate-signing-keys"
	channelRefusal  = "is written only by the toolgate manager"
)

// TestAttackEditUserCannotForgeBundle applies the chart's
// ValidatingAdmissionPolicy for real, then, as a user holding the built-in
// edit role, tries to create, update (with immutable: true) and delete a
// namespace's bundle and the signing keys: all refused, with a message that
// says who may. The manager's ServiceAccount does the same and is not.
func TestAttackEditUserCannotForgeBundle(t *testing.T) {
	// Not parallel with the kustomize variant below: each policy admits only
	// its own manager, so both at once would refuse each other's.
	objs := renderAs(t, "vap", "vap-system")
	m := installRBAC(t, objs)
	requireChannelGuarded(t, objs, m, "vap-app")
}

// TestKustomizeGuardsTheChannel does the same with config/default.
func TestKustomizeGuardsTheChannel(t *testing.T) {
	objs := kustomize(t, "config/default")
	m := installRBAC(t, objs)
	requireChannelGuarded(t, objs, m, "vap-kustomize-app")
}

func requireChannelGuarded(t *testing.T, objs []*unstructured.Unstructured, m installedManager, app string) {
	t.Helper()
	createNamespace(t, app)
	for _, o := range objs {
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if err := apply(o, false); err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
			t.Cleanup(func() {
				if err := k8s.Delete(context.Background(), o.DeepCopy()); client.IgnoreNotFound(err) != nil {
					t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			})
		}
	}
	const mallory = plainUser("mallory")
	for _, ns := range []string{app, m.namespace} {
		bindEdit(t, ns, string(mallory))
		if !canEventually(t, mallory, "create", "", "configmaps", ns, "") {
			t.Fatalf("RBAC: edit does not let %s create ConfigMaps in %s; the test would prove nothing", mallory, ns)
		}
	}
	attacker, manager := impersonate(t, mallory), impersonate(t, m)

	// The policy reaches the admission plugin through an informer: wait
	// until a forged bundle is refused, removing any that got in before.
	forged := channelConfigMap(app, bundleName, `{"schemaVersion":1,"policies":[],"frozenAgents":[]}`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := attacker.Create(ctx(t), forged.DeepCopy())
		if err != nil {
			requireRefused(t, "create the bundle", err)
			break
		}
		// As the manager: the policy may have become active since the
		// create, and then refuses anyone else's delete.
		if err := manager.Delete(ctx(t), forged.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("an edit user could still create the bundle ConfigMap 30 s after the policy was applied")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Nor the parts of a chunked bundle (bundle.PartNames), first to last.
	for _, part := range []string{bundleName + "-1", bundleName + "-16"} {
		requireRefused(t, "create bundle part "+part, attacker.Create(ctx(t), channelConfigMap(app, part, "{}")))
	}
	// Other ConfigMaps are untouched: the refusal is the policy, not RBAC.
	if err := attacker.Create(ctx(t), channelConfigMap(app, "app-settings", "{}")); err != nil {
		t.Fatalf("an edit user can no longer create an ordinary ConfigMap: %v", err)
	}
	if err := attacker.Create(ctx(t), channelConfigMap(app, signingKeysName, "{}")); err != nil {
		t.Errorf("a ConfigMap named %s outside the manager's namespace is refused: %v", signingKeysName, err)
	}

	// The manager publishes, updates and deletes.
	published := channelConfigMap(app, bundleName, `{"schemaVersion":1}`)
	// Eventually: another test's policy, just deleted, may still apply.
	deadline = time.Now().Add(30 * time.Second)
	for err := manager.Create(ctx(t), published.DeepCopy()); err != nil; err = manager.Create(ctx(t), published.DeepCopy()) {
		if time.Now().After(deadline) {
			t.Fatalf("the manager cannot create the bundle: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := manager.Get(ctx(t), client.ObjectKeyFromObject(published), published); err != nil {
		t.Fatal(err)
	}
	published.Data["bundle.json"] = `{"schemaVersion":1,"policies":[]}`
	if err := manager.Update(ctx(t), published); err != nil {
		t.Fatalf("the manager cannot update the bundle: %v", err)
	}

	// The attacker can neither rewrite it, nor pin it, nor remove it.
	rewrite := published.DeepCopy()
	rewrite.Data["bundle.json"] = forged.Data["bundle.json"]
	requireRefused(t, "update the bundle", attacker.Update(ctx(t), rewrite))
	pin := published.DeepCopy()
	pin.Immutable = ptr.To(true)
	requireRefused(t, "make the bundle immutable", attacker.Update(ctx(t), pin))
	requireRefused(t, "patch the bundle's labels",
		attacker.Patch(ctx(t), published.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":null}}`))))
	requireRefused(t, "delete the bundle", attacker.Delete(ctx(t), published.DeepCopy()))
	// kubectl delete configmaps --all: a collection delete is admitted item
	// by item (without request.name: the item is oldObject), so the
	// ordinary ConfigMap goes and the bundle stays, refused by name.
	err := attacker.DeleteAllOf(ctx(t), &corev1.ConfigMap{}, client.InNamespace(app))
	requireRefused(t, "delete every ConfigMap, the bundle included", err)
	if err != nil && !strings.Contains(err.Error(), "ConfigMap "+app+"/"+bundleName+" ") {
		t.Errorf("the refusal of a collection delete does not name the bundle: %v", err)
	}
	if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(published), &corev1.ConfigMap{}); err != nil {
		t.Errorf("after an edit user's delete of every ConfigMap, the bundle: %v", err)
	}
	if err := k8s.Get(ctx(t), client.ObjectKey{Namespace: app, Name: "app-settings"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("an edit user's delete of every ConfigMap left the ordinary one (%v): the policy refused the whole collection", err)
	}

	// Nor the signing keys in the manager's namespace.
	keys := channelConfigMap(m.namespace, signingKeysName, "{}")
	requireRefused(t, "create the signing keys", attacker.Create(ctx(t), keys.DeepCopy()))
	if err := manager.Create(ctx(t), keys); err != nil {
		t.Fatalf("the manager cannot create its signing keys: %v", err)
	}
	keys.Data["k"] = "forged"
	requireRefused(t, "update the signing keys", attacker.Update(ctx(t), keys.DeepCopy()))
	requireRefused(t, "delete the signing keys", attacker.Delete(ctx(t), keys.DeepCopy()))
	if err := manager.Delete(ctx(t), keys); err != nil {
		t.Errorf("the manager cannot delete its signing keys: %v", err)
	}

	if err := manager.Delete(ctx(t), published); err != nil {
		t.Errorf("the manager cannot delete the bundle: %v", err)
	}
}

// TestChannelPolicyLetsANamespaceBeDeleted: once a namespace is
// terminating, its bundle may be deleted by anyone allowed to, as the
// namespace controller must (envtest runs none, so an edit user stands in).
func TestChannelPolicyLetsANamespaceBeDeleted(t *testing.T) {
	objs := renderAs(t, "vap-ns", "vap-ns-system")
	m := installRBAC(t, objs)
	const app = "vap-terminating-app"
	requireChannelGuarded(t, objs, m, app)
	manager := impersonate(t, m)
	cm := channelConfigMap(app, bundleName, "{}")
	part := channelConfigMap(app, bundleName+"-1", "{}")
	for _, o := range []*corev1.ConfigMap{cm, part} {
		if err := manager.Create(ctx(t), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Delete(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app}}); err != nil {
		t.Fatal(err)
	}
	if err := impersonate(t, plainUser("mallory")).Delete(ctx(t), cm); err != nil {
		t.Errorf("deleting the bundle of a terminating namespace: %v", err)
	}
	// The namespace controller empties a namespace with one collection
	// delete per resource (seen on a real node: test/cluster
	// TestSidecarsConfirm), which the policy must let through too.
	if err := impersonate(t, plainUser("mallory")).DeleteAllOf(ctx(t), &corev1.ConfigMap{}, client.InNamespace(app)); err != nil {
		t.Errorf("deleting every ConfigMap of a terminating namespace, as the namespace controller does: %v", err)
	}
	if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(part), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("a bundle part outlived the collection delete of its terminating namespace: %v", err)
	}
}

func requireRefused(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("an edit user could %s", what)
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		t.Errorf("%s: want Forbidden from the admission policy, got %v", what, err)
	case !strings.Contains(err.Error(), channelRefusal) || !strings.Contains(err.Error(), "mallory"):
		t.Errorf("%s: the refusal does not say who may and who was refused: %v", what, err)
	}
}

func channelConfigMap(ns, name, doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string]string{"bundle.json": doc}}
}

// bindEdit gives user the built-in edit ClusterRole in ns (see
// testenv.BindEdit).
func bindEdit(t *testing.T, ns, user string) {
	t.Helper()
	testenv.BindEdit(t, k8s, ns, user)
}

func impersonate(t *testing.T, s subject) client.Client {
	t.Helper()
	return testenv.Impersonate(t, cfg, s.user(), s.groups()...)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
