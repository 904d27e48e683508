package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The generated ClusterRole must be all the manager needs: run it as a user
// bound to nothing else, with leader election, and exercise every write it
// makes (bundle, statuses, events, lease, an ApprovalRequest's conditions
// and its deletion).
func TestGeneratedRoleIsEnough(t *testing.T) {
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	role.Name = "toolgate-manager-rbac-test"
	if err := k8s.Create(ctx, &role); err != nil {
		t.Fatal(err)
	}
	const user = "toolgate-manager-rbac-test"
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	authn, err := env.AddUser(envtest.User{Name: user}, restCfg)
	if err != nil {
		t.Fatal(err)
	}

	ns := testenv.Namespace(t, k8s, "mgr-")
	o := testOptions() // all namespaces: cluster-wide list and watch
	o.LeaderElect, o.LeaderElectionNamespace = true, ns
	o.Kubeconfig = writeKubeconfigFor(t, authn)
	o.Controller.Approvals.Retention = time.Second
	runInBackground(t, o)

	bad := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
		Spec: v1alpha1.PolicySpec{Rules: []v1alpha1.Rule{{ID: "r", Effect: v1alpha1.RuleDeny,
			Conditions: []v1alpha1.Condition{{Field: "input.command", Operator: "matches",
				Value: &apiextensionsv1.JSON{Raw: []byte(`"(?=x)"`)}}}}}}}
	if err := k8s.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "bundle ConfigMap in "+ns, nil)
	testenv.Eventually(t, "CompileError status and event", func() (bool, string) {
		var p v1alpha1.Policy
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bad"}, &p); err != nil {
			return false, err.Error()
		}
		if len(p.Status.Conditions) == 0 || p.Status.Conditions[0].Reason != v1alpha1.ReasonCompileError {
			return false, "no CompileError status"
		}
		var evs eventsv1.EventList
		if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "bad" && e.Reason == v1alpha1.ReasonCompileError {
				return true, ""
			}
		}
		return false, "no event"
	})
	// And deleting the bundle when the namespace empties.
	if err := k8s.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "bundle deleted", func() (bool, string) {
		var cm corev1.ConfigMap
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}, &cm)
		return err != nil, "still there"
	})

	// An ApprovalRequest expired a second ago: its Expired condition, its
	// Event, and its deletion a retention later.
	ar := &v1alpha1.ApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pay"},
		Spec: v1alpha1.ApprovalRequestSpec{AgentID: "a", ServiceAccount: "a", Tool: "pay", ArgumentsDigest: "sha256:" + strings.Repeat("0", 64),
			Policy: "p", Rule: "r", ExpiresAt: metav1.NewTime(time.Now().Add(-time.Second))}}
	if err := k8s.Create(ctx, ar); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the request's Expired condition and event", func() (bool, string) {
		var evs eventsv1.EventList
		if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "pay" && e.Reason == v1alpha1.ReasonApprovalExpired {
				return true, ""
			}
		}
		return false, "no event"
	})
	testenv.Eventually(t, "the request deleted", func() (bool, string) {
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pay"}, &v1alpha1.ApprovalRequest{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func writeKubeconfigFor(t *testing.T, u *envtest.AuthenticatedUser) string {
	t.Helper()
	data, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	return testenv.WriteKubeconfig(t, data)
}

// TestSigningKeyWatchNeedsOnlyItsSecret runs a signing manager as a user
// whose only Secret access in the signing namespace is what role.yaml
// grants by name (get, list, watch toolgate-signing-key) and create: its
// informer must list and watch that one Secret by name, or the cache never
// syncs and no rotation step is taken. Then a rotation step must arrive.
func TestSigningKeyWatchNeedsOnlyItsSecret(t *testing.T) {
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	must(t, err)
	var cluster rbacv1.ClusterRole
	var local rbacv1.Role
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.Contains(doc, "kind: ClusterRole") {
			must(t, yaml.UnmarshalStrict([]byte(doc), &cluster))
		} else if strings.Contains(doc, "kind: Role") {
			must(t, yaml.UnmarshalStrict([]byte(doc), &local))
		}
	}
	// Of the namespaced rules, the key Secret's by name, and create: not the
	// webhook rotator's namespace-wide list and watch.
	var rules []rbacv1.PolicyRule
	for _, r := range local.Rules {
		switch {
		case slices.Contains(r.ResourceNames, bundle.SigningKeySecretName):
			rules = append(rules, r)
		case len(r.ResourceNames) == 0 && slices.Contains(r.Verbs, "create"):
			r.Verbs = []string{"create"}
			rules = append(rules, r)
		}
	}
	if len(rules) != 2 {
		t.Fatalf("role.yaml's Role has no rule naming %s: %+v", bundle.SigningKeySecretName, local.Rules)
	}
	ctx := context.Background()
	sns, ns := testenv.Namespace(t, k8s, "mgr-"), testenv.Namespace(t, k8s, "mgr-")
	const user = "toolgate-manager-signing-rbac-test"
	cluster.ObjectMeta = metav1.ObjectMeta{Name: user}
	must(t, k8s.Create(ctx, &cluster))
	must(t, k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}))
	must(t, k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: sns, Name: user}, Rules: rules}))
	must(t, k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: sns, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}))
	authn, err := env.AddUser(envtest.User{Name: user}, restCfg)
	must(t, err)

	o := signingOptions(t, sns, ns)
	o.Kubeconfig = writeKubeconfigFor(t, authn)
	runInBackground(t, o)
	createPolicy(t, ns, "p")
	publishedKeys(t, sns)
	ring, err := RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateAdd, "", false)
	must(t, err)
	next := ring.Keys()[1]
	_, err = RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotatePromote, next.ID(), false)
	must(t, err)
	testenv.Eventually(t, "the bundle re-signed with the promoted key, under name-only Secret access", func() (bool, string) {
		s, err := bundleSignature(t, ns, ring.Trusted())
		return err == nil && s.KeyID == next.ID(), fmt.Sprint(s.KeyID, err)
	})
}
