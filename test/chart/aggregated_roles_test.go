package chart

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAggregatedRolesGrantWhatTheySay: the view role reads Policies and
// FrozenAgents, the admin role writes them, and each is labelled for the
// built-in roles it joins. envtest runs no kube-controller-manager, so
// nothing aggregates here: the test binds the chart's roles directly, as
// aggregation would merge them, and asks the API server what they allow
// (waiting for grants: bindings reach the authorizer through an informer).
func TestAggregatedRolesGrantWhatTheySay(t *testing.T) {
	t.Parallel()
	objs := render(t)
	view := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "toolgate-view"))
	admin := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "toolgate-admin"))
	for role, joins := range map[*rbacv1.ClusterRole][]string{view: {"view", "edit", "admin"}, admin: {"admin"}} {
		for _, builtin := range []string{"view", "edit", "admin"} {
			want := ""
			for _, j := range joins {
				if j == builtin {
					want = "true"
				}
			}
			if got := role.Labels["rbac.authorization.k8s.io/aggregate-to-"+builtin]; got != want {
				t.Errorf("%s: aggregate-to-%s=%q, want %q", role.Name, builtin, got, want)
			}
		}
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && (o.GetName() == view.Name || o.GetName() == admin.Name) {
			if err := apply(o, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	const ns = "team-aggregated"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bind := func(user string, roles ...string) {
		for _, r := range roles {
			rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + r},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
			if err := k8s.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	bind("viewer", view.Name)               // what view and edit get
	bind("ns-admin", view.Name, admin.Name) // what admin gets
	// Agents and MCPUpstreams say who an agent is and what it may reach:
	// like Policies, an editor (the viewer's grants) only reads them.
	for _, resource := range []string{"policies", "frozenagents", "agents", "mcpupstreams"} {
		for _, verb := range []string{"get", "list", "watch"} {
			for _, user := range []plainUser{"viewer", "ns-admin"} {
				if !canEventually(t, user, verb, "toolgate.dev", resource, ns, "") {
					t.Errorf("%s may not %s %s", user, verb, resource)
				}
			}
		}
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
			if !canEventually(t, plainUser("ns-admin"), verb, "toolgate.dev", resource, ns, "") {
				t.Errorf("ns-admin may not %s %s", verb, resource)
			}
			// Checked after ns-admin's grants: by then the viewer's binding
			// has long applied, and lag can only delay grants anyway.
			if can(t, plainUser("viewer"), verb, "toolgate.dev", resource, ns, "") {
				t.Errorf("viewer may %s %s", verb, resource)
			}
		}
	}
	// config/default carries the same two roles.
	k := kustomize(t, "config/default")
	for _, r := range []*rbacv1.ClusterRole{view, admin} {
		kr := typed[rbacv1.ClusterRole](t, find(t, k, "ClusterRole", r.Name))
		if !reflect.DeepEqual(kr.Rules, r.Rules) {
			t.Errorf("%s rules: kustomize %+v, chart %+v", r.Name, kr.Rules, r.Rules)
		}
		for key, v := range r.Labels {
			if strings.HasPrefix(key, "rbac.authorization.k8s.io/") && kr.Labels[key] != v {
				t.Errorf("%s: kustomize lacks %s=%s", r.Name, key, v)
			}
		}
	}
	if n := len(all(render(t, "--set", "rbac.aggregateToDefaultRoles=false"), "ClusterRole")); n != 2 {
		t.Errorf("aggregation off: %d ClusterRoles, want only the manager's and the sidecars' cluster-freeze reader", n)
	}
}
