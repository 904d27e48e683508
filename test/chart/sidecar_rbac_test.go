package chart

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

// podServiceAccount is the identity an injected sidecar (and, where its
// token is mounted, the agent beside it) talks to the API server as.
type podServiceAccount struct{ namespace, name string }

func (s podServiceAccount) user() string {
	return "system:serviceaccount:" + s.namespace + ":" + s.name
}

func (s podServiceAccount) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + s.namespace, "system:authenticated"}
}

// TestSidecarRBACReadsClusterFreezesAndNothingMore: with the chart's RBAC,
// and with config/'s, any Pod's ServiceAccount may get, list and watch
// ClusterFrozenAgents (the sidecar's cluster watch) and nothing else it
// could not before: not write them, not read ClusterPolicies, Namespaces,
// Secrets, ConfigMaps or other namespaces' FrozenAgents. Then the attack:
// code holding that token deletes or patches the ClusterFrozenAgent that
// freezes it, and is refused.
func TestSidecarRBACReadsClusterFreezesAndNothingMore(t *testing.T) {
	t.Parallel()
	// A release of its own: the default one's ClusterRoles share their
	// names with config/default's, which TestKustomizeRBACGrantsWhatTheCodeNeeds
	// checks in parallel, and applying one over the other races it.
	chart := renderAs(t, "sidecar-rbac", "sidecar-rbac-system")
	for name, objs := range map[string][]*unstructured.Unstructured{
		"chart":     chart,
		"kustomize": kustomize(t, "config/default"),
	} {
		t.Run(name, func(t *testing.T) {
			installRBAC(t, objs)
			find(t, objs, "ClusterRoleBinding", map[string]string{"chart": "sidecar-rbac-toolgate-sidecar-cluster-freezes",
				"kustomize": "toolgate-sidecar-cluster-freezes"}[name])
			sa := podServiceAccount{"team-sidecar-rbac", "billing-bot"}
			createNamespace(t, sa.namespace)
			for _, verb := range []string{"get", "list", "watch"} {
				if !canEventually(t, sa, verb, v1alpha1.GroupVersion.Group, "clusterfrozenagents", "", "") {
					t.Errorf("%s may not %s clusterfrozenagents", sa.user(), verb)
				}
			}
			for _, a := range []access{
				{"create", "toolgate.dev", "clusterfrozenagents", "", ""},
				{"update", "toolgate.dev", "clusterfrozenagents", "", "any"},
				{"patch", "toolgate.dev", "clusterfrozenagents", "", "any"},
				{"delete", "toolgate.dev", "clusterfrozenagents", "", "any"},
				{"deletecollection", "toolgate.dev", "clusterfrozenagents", "", ""},
				{"update", "toolgate.dev", "clusterfrozenagents/status", "", "any"},
				{"list", "toolgate.dev", "clusterpolicies", "", ""},
				{"list", "toolgate.dev", "policyexceptions", sa.namespace, ""},
				{"list", "toolgate.dev", "frozenagents", "other-team", ""},
				{"list", "toolgate.dev", "policies", sa.namespace, ""},
				{"list", "", "namespaces", "", ""},
				{"get", "", "secrets", sa.namespace, ""},
				{"list", "", "configmaps", sa.namespace, ""},
			} {
				if can(t, sa, a.verb, a.group, a.resource, a.namespace, a.name) {
					t.Errorf("%s may %s %s.%s %q in %q: more than reading cluster freezes", sa.user(), a.verb, a.resource, a.group, a.name, a.namespace)
				}
			}
		})
	}

	t.Run("attack: the frozen agent's token cannot lift its cluster freeze", func(t *testing.T) {
		installRBAC(t, chart)
		sa := podServiceAccount{"team-sidecar-attack", "frozen-bot"}
		createNamespace(t, sa.namespace)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		cf := &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "freeze-frozen-bot-rbac"},
			Spec: v1alpha1.ClusterFrozenAgentSpec{FrozenAgentSpec: v1alpha1.FrozenAgentSpec{ServiceAccount: sa.name, Reason: "INC-7"}}}
		if err := admin.Create(ctx, cf); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), cf) })
		if !canEventually(t, sa, "get", v1alpha1.GroupVersion.Group, "clusterfrozenagents", "", cf.Name) {
			t.Fatal("the sidecar's grant never applied")
		}
		agent := testenv.Impersonate(t, cfg, sa.user(), sa.groups()...)
		var seen v1alpha1.ClusterFrozenAgent
		if err := agent.Get(ctx, client.ObjectKeyFromObject(cf), &seen); err != nil {
			t.Fatalf("reading its freeze: %v", err)
		}
		if err := agent.Delete(ctx, &seen); !apierrors.IsForbidden(err) {
			t.Errorf("delete: %v, want Forbidden", err)
		}
		past := metav1.NewTime(time.Now().Add(-time.Hour))
		seen.Spec.ExpiresAt = &past
		if err := agent.Update(ctx, &seen); !apierrors.IsForbidden(err) {
			t.Errorf("update: %v, want Forbidden", err)
		}
		if err := agent.Create(ctx, &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "decoy"},
			Spec: v1alpha1.ClusterFrozenAgentSpec{FrozenAgentSpec: v1alpha1.FrozenAgentSpec{AgentID: "someone-else"}}}); !apierrors.IsForbidden(err) {
			t.Errorf("create: %v, want Forbidden", err)
		}
		var still v1alpha1.ClusterFrozenAgent
		if err := admin.Get(ctx, client.ObjectKeyFromObject(cf), &still); err != nil || still.Spec.ExpiresAt != nil {
			t.Errorf("the freeze after the attack: %+v, %v", still.Spec, err)
		}
	})
}
