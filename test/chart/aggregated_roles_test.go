package chart

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
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
	for _, resource := range []string{"policies", "frozenagents", "agents", "mcpupstreams", "policyexceptions"} {
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
	// Everyone who sees the namespace reads its ApprovalRequests; only its
	// admins decide them (the status write), never by writing the object.
	for _, verb := range []string{"get", "list", "watch"} {
		for _, user := range []plainUser{"viewer", "ns-admin"} {
			if !canEventually(t, user, verb, "toolgate.dev", "approvalrequests", ns, "") {
				t.Errorf("%s may not %s approvalrequests", user, verb)
			}
		}
	}
	for _, verb := range []string{"update", "patch"} {
		if !canEventually(t, plainUser("ns-admin"), verb, "toolgate.dev", "approvalrequests/status", ns, "") {
			t.Errorf("ns-admin may not %s approvalrequests/status", verb)
		}
		if can(t, plainUser("viewer"), verb, "toolgate.dev", "approvalrequests/status", ns, "") {
			t.Errorf("viewer may %s approvalrequests/status", verb)
		}
	}
	for _, verb := range []string{"create", "update", "delete"} {
		if can(t, plainUser("ns-admin"), verb, "toolgate.dev", "approvalrequests", ns, "") {
			t.Errorf("ns-admin may %s approvalrequests: only sidecars ask, and a request is never rewritten", verb)
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
	if n := len(all(render(t, "--set", "rbac.aggregateToDefaultRoles=false"), "ClusterRole")); n != 3 {
		t.Errorf("aggregation off: %d ClusterRoles, want only the manager's, the sidecars' cluster-freeze reader and toolgate-approver", n)
	}
}

// TestAttackNamespaceRolesCannotWriteClusterGuardrails plays a namespace's
// editor and its admin (RoleBindings to the built-in edit and admin roles,
// with what the chart's roles aggregate into them), impersonated through
// the API with real RBAC: neither can create a ClusterPolicy or a
// ClusterFrozenAgent (the cluster's guardrails and kill switch are the
// cluster administrators'); the editor cannot exempt an agent with a
// PolicyException, the namespace admin can. Writes are server-side dry
// runs: authorized as real ones, nothing stored.
func TestAttackNamespaceRolesCannotWriteClusterGuardrails(t *testing.T) {
	for _, o := range render(t) {
		if o.GetKind() == "ClusterRole" && (o.GetName() == "toolgate-view" || o.GetName() == "toolgate-admin") {
			if err := apply(o, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	const ns, editor, admin = "team-guardrails", "guardrails-editor", "guardrails-admin"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	testenv.BindAggregated(t, k8s, ns, editor, "edit")
	testenv.BindAggregated(t, k8s, ns, admin, "admin")
	asEditor, asAdmin := testenv.Impersonate(t, cfg, editor), testenv.Impersonate(t, cfg, admin)

	cp := func() client.Object {
		return &v1alpha1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "loosened"},
			Spec: v1alpha1.ClusterPolicySpec{PolicySpec: v1alpha1.PolicySpec{Rules: []v1alpha1.Rule{{ID: "allow-all", Effect: v1alpha1.RuleAllow}}}}}
	}
	cf := func() client.Object {
		return &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "freeze-everyone"},
			Spec: v1alpha1.ClusterFrozenAgentSpec{FrozenAgentSpec: v1alpha1.FrozenAgentSpec{AllAgents: true, Reason: "mischief"}}}
	}
	pe := func() client.Object {
		return &v1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exempt-me"},
			Spec: v1alpha1.PolicyExceptionSpec{PolicyRef: v1alpha1.PolicyReference{Kind: v1alpha1.PolicyKindPolicy, Name: "guard"},
				RuleIDs: []string{"no-rm"}, Agents: v1alpha1.ExceptionAgents{AgentIDs: []string{"bot"}},
				ExpiresAt: metav1.NewTime(time.Now().Add(24 * time.Hour)), Justification: "trust me"}}
	}
	dryCreate := func(c client.Client, obj client.Object) error {
		return c.Create(ctx, obj, client.DryRunAll)
	}

	// The admin's exception is allowed once the binding reaches the
	// authorizer; by then every denial below is the role's, not lag's.
	testenv.EventuallyWithin(t, 30*time.Second, 100*time.Millisecond, "namespace admin creates a PolicyException", func() (bool, string) {
		err := dryCreate(asAdmin, pe())
		return err == nil, fmt.Sprint(err)
	})
	if err := dryCreate(asEditor, pe()); !apierrors.IsForbidden(err) {
		t.Errorf("editor creating a PolicyException: %v, want Forbidden", err)
	}
	for user, c := range map[string]client.Client{editor: asEditor, admin: asAdmin} {
		for _, obj := range []client.Object{cp(), cf()} {
			if err := dryCreate(c, obj); !apierrors.IsForbidden(err) {
				t.Errorf("%s creating %T: %v, want Forbidden", user, obj, err)
			}
		}
		// Reading them is not theirs either: no namespace role aggregates them.
		if err := c.List(ctx, &v1alpha1.ClusterPolicyList{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s listing ClusterPolicies: %v, want Forbidden", user, err)
		}
	}
	// The editor still reads the namespace's exceptions (view aggregates them).
	testenv.EventuallyWithin(t, 30*time.Second, 100*time.Millisecond, "editor lists PolicyExceptions", func() (bool, string) {
		err := asEditor.List(ctx, &v1alpha1.PolicyExceptionList{}, client.InNamespace(ns))
		return err == nil, fmt.Sprint(err)
	})
}
