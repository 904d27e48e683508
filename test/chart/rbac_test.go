package chart

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

// installedManager is who the installed manager runs as, and the objects its flags
// name.
type installedManager struct {
	namespace, serviceAccount    string
	secret, validating, mutating string
}

func (m installedManager) user() string {
	return "system:serviceaccount:" + m.namespace + ":" + m.serviceAccount
}

func (m installedManager) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + m.namespace, "system:authenticated"}
}

// installRBAC applies, for real, the ServiceAccount and RBAC objects of objs
// (the rest stays out: a real webhook configuration would intercept other
// tests' requests) and describes the manager they are for.
func installRBAC(t *testing.T, objs []*unstructured.Unstructured) installedManager {
	t.Helper()
	ensureNamespaces(t, objs)
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := apply(o, false); err != nil {
				t.Fatalf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
	}
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ""))
	args := d.Spec.Template.Spec.Containers[0].Args
	m := installedManager{namespace: d.Namespace, serviceAccount: d.Spec.Template.Spec.ServiceAccountName}
	m.secret, _ = flagValue(args, "webhook-secret-name")
	m.validating, _ = flagValue(args, "validating-webhook-configuration")
	m.mutating, _ = flagValue(args, "mutating-webhook-configuration")
	return m
}

// subject is who a SubjectAccessReview asks about: the installed manager,
// or a plain user.
type subject interface {
	user() string
	groups() []string
}

// plainUser is a user in no group but system:authenticated.
type plainUser string

func (u plainUser) user() string     { return string(u) }
func (u plainUser) groups() []string { return []string{"system:authenticated"} }

// can asks the API server whether m may do verb on group/resource (with an
// optional /subresource) named name in namespace.
func can(t *testing.T, m subject, verb, group, resource, namespace, name string) bool {
	t.Helper()
	return testenv.Can(t, k8s, m.user(), m.groups(), verb, group, resource, namespace, name)
}

// canEventually is can for an access the test expects to be granted (see
// testenv.CanEventually).
func canEventually(t *testing.T, m subject, verb, group, resource, namespace, name string) bool {
	t.Helper()
	return testenv.CanEventually(t, k8s, m.user(), m.groups(), verb, group, resource, namespace, name)
}

// generatedRules reads config/rbac/role.yaml, which controller-gen writes
// from the +kubebuilder:rbac markers: what the code says it needs.
func generatedRules(t *testing.T) (cluster, local []rbacv1.PolicyRule) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			cluster = append(cluster, typed[rbacv1.ClusterRole](t, o).Rules...)
		case "Role":
			// A namespace= marker: the manager's own namespace.
			local = append(local, typed[rbacv1.Role](t, o).Rules...)
		default:
			t.Fatalf("role.yaml: unexpected %s", o.GetKind())
		}
	}
	if len(cluster) == 0 {
		t.Fatal("role.yaml has no ClusterRole rules")
	}
	return cluster, local
}

// clusterScoped resources the manager touches.
var clusterScoped = []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}

// requireGeneratedRules checks that m holds every permission of role.yaml,
// as narrowly as the install grants it: writing leases and the generated
// Role in m's namespace (sidecars' Leases are only read, in appNamespace),
// other namespaced rules in appNamespace, and get/update of
// Secrets and webhook configurations on m's own objects only.
func requireGeneratedRules(t *testing.T, m installedManager, appNamespace string) {
	t.Helper()
	cluster, local := generatedRules(t)
	check := func(rules []rbacv1.PolicyRule, defaultNamespace string) {
		for _, r := range rules {
			for _, group := range r.APIGroups {
				for _, resource := range r.Resources {
					for _, verb := range r.Verbs {
						ns := defaultNamespace
						switch {
						case slices.Contains(clusterScoped, resource):
							ns = ""
						case resource == "leases" && verb != "get" && verb != "list" && verb != "watch":
							ns = m.namespace // written for leader election only
						}
						name := ""
						if len(r.ResourceNames) > 0 {
							name = r.ResourceNames[0]
							if resource == "secrets" && name != "toolgate-signing-key" {
								name = m.secret // the webhook Secret, named by the install
							}
						} else if verb == "get" || verb == "update" || verb == "patch" || verb == "delete" {
							name = map[string]string{"secrets": m.secret,
								"validatingwebhookconfigurations": m.validating,
								"mutatingwebhookconfigurations":   m.mutating}[resource]
						}
						if !canEventually(t, m, verb, group, resource, ns, name) {
							t.Errorf("%s cannot %s %s.%s %q in namespace %q, which role.yaml asks for", m.user(), verb, resource, group, name, ns)
						}
					}
				}
			}
		}
	}
	check(cluster, appNamespace)
	check(local, m.namespace)
}

type access struct{ verb, group, resource, namespace, name string }

func requireDenied(t *testing.T, m installedManager, denied []access) {
	t.Helper()
	for _, a := range denied {
		if can(t, m, a.verb, a.group, a.resource, a.namespace, a.name) {
			t.Errorf("%s may %s %s.%s %q in namespace %q: wider than the manager needs", m.user(), a.verb, a.resource, a.group, a.name, a.namespace)
		}
	}
}

// beyondNeeds are permissions no toolgate install grants.
func beyondNeeds(m installedManager, appNamespace string) []access {
	return []access{
		{"get", "", "secrets", appNamespace, ""},
		{"list", "", "secrets", appNamespace, ""},
		{"get", "", "secrets", m.namespace, "someone-elses-secret"},
		{"update", "", "secrets", m.namespace, "someone-elses-secret"},
		{"delete", "", "secrets", m.namespace, m.secret},
		{"update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "someone-elses-webhook"},
		{"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "someone-elses-webhook"},
		{"delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", m.validating},
		{"create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", ""},
		{"create", "rbac.authorization.k8s.io", "clusterroles", "", ""},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""},
		{"delete", "rbac.authorization.k8s.io", "roles", appNamespace, "toolgate-bundle-reader"},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "cluster-admin"},
		{"escalate", "rbac.authorization.k8s.io", "roles", appNamespace, ""},
		{"create", "", "pods", appNamespace, ""},
		{"create", "", "serviceaccounts/token", appNamespace, "default"},
		{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", "policies.toolgate.dev"},
		{"create", "toolgate.dev", "policies", appNamespace, ""},
		{"update", "toolgate.dev", "policies", appNamespace, "any"},
		// Create and update of Leases it holds only to grant them to
		// sidecars (webhook.SidecarRoleRules); never delete.
		{"delete", "coordination.k8s.io", "leases", appNamespace, "any"},
	}
}

// requireCanGrantBundleRead impersonates the manager and does what sidecar
// injection does: the sidecar's Role (webhook.SidecarRoleRules: the one
// bundle ConfigMap, FrozenAgents, approvals), bound to the pod's service
// account. The API server's escalation check passes only if the manager
// itself holds that access; a Role granting Secrets must fail.
func requireCanGrantBundleRead(t *testing.T, m installedManager, appNamespace, bundle string) {
	t.Helper()
	imp := rest.CopyConfig(cfg)
	imp.Impersonate = rest.ImpersonationConfig{UserName: m.user(), Groups: m.groups()}
	c, err := client.New(imp, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "toolgate-bundle-reader"},
		Rules:      webhook.SidecarRoleRules(bundle),
	}
	if err := c.Create(ctx, role); err != nil {
		t.Fatalf("as the manager, creating the bundle reader Role in %s: %v", appNamespace, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "toolgate-bundle-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "agent", Namespace: appNamespace}},
	}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatalf("as the manager, binding the bundle reader Role in %s: %v", appNamespace, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(role), role); err != nil {
		t.Errorf("as the manager, reading back the Role: %v", err)
	}
	// The sidecar writes a pinned MCP tool's drift as an Event on its
	// MCPUpstream: create, and nothing else on Events.
	agent := podServiceAccount{appNamespace, "agent"}
	if !canEventually(t, agent, "create", "", "events", appNamespace, "") {
		t.Errorf("the sidecar's Role does not let %s create Events", agent.user())
	}
	for _, a := range []access{{"get", "", "events", appNamespace, "any"}, {"delete", "", "events", appNamespace, "any"},
		{"create", "", "events", "default", ""}} {
		if can(t, agent, a.verb, a.group, a.resource, a.namespace, a.name) {
			t.Errorf("%s may %s events %q in %q: the sidecar only creates them in its own namespace", agent.user(), a.verb, a.name, a.namespace)
		}
	}
	binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "agent-2", Namespace: appNamespace})
	if err := c.Update(ctx, binding); err != nil {
		t.Errorf("as the manager, adding a subject to the RoleBinding: %v", err)
	}
	wider := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "toolgate-escalation-probe"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}},
	}
	if err := c.Create(ctx, wider); !apierrors.IsForbidden(err) {
		t.Errorf("as the manager, creating a Role that reads Secrets: want Forbidden, got %v", err)
	}
}

// requireSigningAccess checks what bundle signing needs in the manager's
// namespace: create and read the key Secret, publish the public keys.
func requireSigningAccess(t *testing.T, m installedManager) {
	t.Helper()
	for _, a := range []access{
		{"create", "", "secrets", m.namespace, ""},
		{"get", "", "secrets", m.namespace, "toolgate-signing-key"},
		{"list", "", "secrets", m.namespace, "toolgate-signing-key"},
		{"watch", "", "secrets", m.namespace, "toolgate-signing-key"},
		{"create", "", "events", m.namespace, ""},
		{"create", "", "configmaps", m.namespace, ""},
		{"get", "", "configmaps", m.namespace, "toolgate-signing-keys"},
		{"update", "", "configmaps", m.namespace, "toolgate-signing-keys"},
	} {
		if !canEventually(t, m, a.verb, a.group, a.resource, a.namespace, a.name) {
			t.Errorf("%s cannot %s %s %q in %s, which bundle signing needs", m.user(), a.verb, a.resource, a.name, a.namespace)
		}
	}
	requireDenied(t, m, []access{{"update", "", "secrets", m.namespace, "toolgate-signing-key"}})
}

func TestChartRBACGrantsWhatTheCodeNeedsAndNoMore(t *testing.T) {
	t.Parallel()
	const app = "rbac-chart-app"
	createNamespace(t, app)
	m := installRBAC(t, renderAs(t, "rbac-all", "rbac-all-system"))
	requireGeneratedRules(t, m, app)
	requireDenied(t, m, beyondNeeds(m, app))
	requireCanGrantBundleRead(t, m, app, "toolgate-bundle")
	requireSigningAccess(t, m)
}

func TestChartRBACConfinedToWatchedNamespaces(t *testing.T) {
	t.Parallel()
	const watched, other = "rbac-team-a", "rbac-team-b"
	createNamespace(t, other)
	m := installRBAC(t, renderAs(t, "rbac-ns", "rbac-ns-system", "--set", "manager.namespaces={"+watched+"}"))
	requireGeneratedRules(t, m, watched)
	requireDenied(t, m, append(beyondNeeds(m, watched),
		access{"get", "", "configmaps", other, ""},
		access{"list", "toolgate.dev", "policies", other, ""},
		access{"list", "toolgate.dev", "policies", "", ""},
		access{"create", "rbac.authorization.k8s.io", "roles", other, ""},
		access{"create", "coordination.k8s.io", "leases", other, ""},
	))
	requireCanGrantBundleRead(t, m, watched, "toolgate-bundle")
	requireSigningAccess(t, m)
}

func TestChartRBACWithCertManagerLeavesSecretsAlone(t *testing.T) {
	t.Parallel()
	m := installRBAC(t, renderAs(t, "rbac-cm", "rbac-cm-system", "--set", "certManager.enabled=true"))
	requireDenied(t, m, []access{
		{"get", "", "secrets", m.namespace, m.secret},
		{"list", "", "secrets", m.namespace, ""},
		{"update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", m.validating},
	})
	requireSigningAccess(t, m)
}

func TestKustomizeRBACGrantsWhatTheCodeNeeds(t *testing.T) {
	t.Parallel()
	const app = "rbac-kustomize-app"
	createNamespace(t, app)
	m := installRBAC(t, kustomize(t, "config/default"))
	requireGeneratedRules(t, m, app)
	// What the webhooks need, whether or not role.yaml is current.
	for _, a := range []access{
		{"get", "", "secrets", m.namespace, m.secret},
		{"update", "", "secrets", m.namespace, m.secret},
		{"watch", "", "secrets", m.namespace, ""},
		{"update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", m.validating},
		{"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", m.mutating},
		{"get", "coordination.k8s.io", "leases", m.namespace, "toolgate-manager.toolgate.dev"},
	} {
		if !canEventually(t, m, a.verb, a.group, a.resource, a.namespace, a.name) {
			t.Errorf("%s cannot %s %s %q in %q", m.user(), a.verb, a.resource, a.name, a.namespace)
		}
	}
	// Secrets as narrowly as the chart: only the webhook's and the key.
	requireSigningAccess(t, m)
	requireDenied(t, m, []access{
		{"get", "", "secrets", m.namespace, "someone-elses-secret"},
		{"update", "", "secrets", m.namespace, "someone-elses-secret"},
		{"delete", "", "secrets", m.namespace, m.secret},
		{"get", "", "secrets", app, ""},
		{"create", "rbac.authorization.k8s.io", "clusterroles", "", ""},
		{"create", "", "pods", app, ""},
		{"update", "toolgate.dev", "policies", app, "any"},
	})
	requireCanGrantBundleRead(t, m, app, "toolgate-bundle")
}
