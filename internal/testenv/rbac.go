package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BindEdit gives user the built-in edit ClusterRole in ns, through c (an
// admin's client). envtest runs no kube-controller-manager, so edit is
// still empty: the rules its aggregationRule selects (the API server's
// bootstrap system:aggregate-to-edit and friends) go into a copy, as the
// aggregation controller would put them into edit.
func BindEdit(t testing.TB, c client.Client, ns, user string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var edit rbacv1.ClusterRole
	if err := c.Get(ctx, client.ObjectKey{Name: "edit"}, &edit); err != nil {
		t.Fatalf("the built-in edit role: %v", err)
	}
	aggregated := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-aggregated-edit"}}
	for _, sel := range edit.AggregationRule.ClusterRoleSelectors {
		var parts rbacv1.ClusterRoleList
		if err := c.List(ctx, &parts, client.MatchingLabels(sel.MatchLabels)); err != nil {
			t.Fatal(err)
		}
		for _, p := range parts.Items {
			aggregated.Rules = append(aggregated.Rules, p.Rules...)
		}
	}
	if err := c.Create(ctx, aggregated); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edit-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: aggregated.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := c.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// Impersonate is a client acting as user in groups through cfg (an
// admin's): the API server then applies that user's RBAC and admission.
func Impersonate(t testing.TB, cfg *rest.Config, user string, groups ...string) client.Client {
	t.Helper()
	imp := rest.CopyConfig(cfg)
	imp.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(imp, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Can asks the API server, through c (an admin's client), whether user in
// groups may do verb on group/resource (with an optional /subresource)
// named name in namespace.
func Can(t testing.TB, c client.Client, user string, groups []string, verb, group, resource, namespace, name string) bool {
	t.Helper()
	res, sub, _ := strings.Cut(resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: group, Resource: res, Subresource: sub, Name: name},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Create(ctx, sar); err != nil {
		t.Fatalf("SubjectAccessReview: %v", err)
	}
	return sar.Status.Allowed
}

// CanEventually is Can for an access the test expects to be granted. RBAC
// objects just applied reach the authorizer through an informer, so a grant
// can take a moment to apply, longer on a loaded machine; a denial needs no
// wait, since lag only ever delays grants.
func CanEventually(t testing.TB, c client.Client, user string, groups []string, verb, group, resource, namespace, name string) bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !Can(t, c, user, groups, verb, group, resource, namespace, name) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// BindAggregated gives user the built-in ClusterRole builtin (view, edit or
// admin) in ns through a RoleBinding, as a namespace's owner would, with
// what aggregation puts into it now: like BindEdit, but a copy of its own
// (test-aggregated-<builtin>-<user>), made after the caller installed
// the roles that aggregate into it.
func BindAggregated(t testing.TB, c client.Client, ns, user, builtin string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var role rbacv1.ClusterRole
	if err := c.Get(ctx, client.ObjectKey{Name: builtin}, &role); err != nil {
		t.Fatalf("the built-in %s role: %v", builtin, err)
	}
	aggregated := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-aggregated-" + builtin + "-" + user}}
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		var parts rbacv1.ClusterRoleList
		if err := c.List(ctx, &parts, client.MatchingLabels(sel.MatchLabels)); err != nil {
			t.Fatal(err)
		}
		for _, p := range parts.Items {
			aggregated.Rules = append(aggregated.Rules, p.Rules...)
		}
	}
	if err := c.Create(ctx, aggregated); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: builtin + "-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: aggregated.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := c.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
}
