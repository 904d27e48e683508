package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The envtest API server is shared by the package's tests: every
// cluster-scoped object here selects only namespaces labelled with the
// test's own value, and is deleted when the test ends.
const testLabel = "toolgate.dev/test-cluster-level"

// clusterPolicy denies tool when the namespace carries testLabel=team.
func clusterPolicy(t *testing.T, name, team, tool string) *v1alpha1.ClusterPolicy {
	t.Helper()
	cp := &v1alpha1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterPolicySpec{
			PolicySpec: v1alpha1.PolicySpec{DefaultEffect: v1alpha1.EffectAllow, Rules: []v1alpha1.Rule{{
				ID: "no-" + tool, Effect: v1alpha1.RuleDeny, Description: "no " + tool + " anywhere",
				Conditions: []v1alpha1.Condition{{Field: "tool_name", Operator: "eq", Value: jsonValue(fmt.Sprintf("%q", tool))}},
			}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{testLabel: team}},
		}}
	return cp
}

// createCluster creates a cluster-scoped object and deletes it at the end.
func createCluster(t *testing.T, obj client.Object) {
	t.Helper()
	create(t, obj)
	t.Cleanup(func() { _ = client.IgnoreNotFound(k8s.Delete(context.Background(), obj)) })
}

// labelNamespace sets (value != "") or removes testLabel on ns.
func labelNamespace(t *testing.T, ns, value string) {
	t.Helper()
	var n corev1.Namespace
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: ns}, &n); err != nil {
		t.Fatal(err)
	}
	before := n.DeepCopy()
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if value == "" {
		delete(n.Labels, testLabel)
	} else {
		n.Labels[testLabel] = value
	}
	if err := k8s.Patch(context.Background(), &n, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

func hasClusterPolicy(b engine.Bundle, name string) bool {
	return slices.ContainsFunc(b.Policies, func(p engine.Policy) bool { return p.ID == name && p.Kind == engine.KindClusterPolicy })
}

// waitForClusterPolicy waits for the ClusterPolicy's status to satisfy ok.
func waitForClusterPolicy(t *testing.T, name, what string, ok func(*v1alpha1.ClusterPolicy) bool) *v1alpha1.ClusterPolicy {
	t.Helper()
	var cp v1alpha1.ClusterPolicy
	testenv.Eventually(t, "ClusterPolicy "+name+" "+what, func() (bool, string) {
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, &cp); err != nil {
			return false, err.Error()
		}
		return ok(&cp), fmt.Sprintf("status %+v", cp.Status)
	})
	return &cp
}

func readyIs(conds []metav1.Condition, status metav1.ConditionStatus, reason string) bool {
	c := readyOf(conds)
	return c != nil && c.Status == status && c.Reason == reason
}

// A ClusterPolicy reaches the bundles of the namespaces its selector
// chooses, one with no object of its own included, and not the others;
// relabelling a namespace re-publishes it, adding or removing the policy.
// Its status counts the namespaces it is live in.
func TestClusterPolicyFollowsTheNamespaceSelector(t *testing.T) {
	team := testenv.Namespace(t, k8s, "tg-") // a unique label value
	selected, bare, other := testenv.Namespace(t, k8s, "tg-"), testenv.Namespace(t, k8s, "tg-"), testenv.Namespace(t, k8s, "tg-")
	labelNamespace(t, selected, team)
	labelNamespace(t, bare, team)
	startManager(t, controllers.Options{}, selected, bare, other)
	create(t, policy(selected, "own", 1))
	create(t, policy(other, "own", 1))
	cp := clusterPolicy(t, "no-rm-"+team, team, "rm")
	createCluster(t, cp)

	_, b := testenv.WaitForBundle(t, k8s, selected, bundle.DefaultConfigMapName, "the ClusterPolicy beside the namespace's own",
		func(b engine.Bundle) bool { return hasClusterPolicy(b, cp.Name) && len(b.Policies) == 2 })
	if b.NamespaceLabels[testLabel] != team {
		t.Errorf("bundle carries namespace labels %v", b.NamespaceLabels)
	}
	testenv.WaitForBundle(t, k8s, bare, bundle.DefaultConfigMapName, "a bundle for a namespace the ClusterPolicy alone selects",
		func(b engine.Bundle) bool { return hasClusterPolicy(b, cp.Name) && len(b.Policies) == 1 })
	_, ob := testenv.WaitForBundle(t, k8s, other, bundle.DefaultConfigMapName, "the unselected namespace's own bundle",
		func(b engine.Bundle) bool { return len(b.Policies) == 1 })
	if hasClusterPolicy(ob, cp.Name) {
		t.Fatalf("an unselected namespace holds the ClusterPolicy: %v", policyIDs(ob))
	}
	got := waitForClusterPolicy(t, cp.Name, "Ready in 2 namespaces", func(cp *v1alpha1.ClusterPolicy) bool {
		return readyIs(cp.Status.Conditions, metav1.ConditionTrue, v1alpha1.ReasonPublished) && cp.Status.Namespaces == 2
	})
	if got.Status.RuleCount != 1 || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status %+v", got.Status)
	}

	// Selector changes: other joins, selected leaves.
	labelNamespace(t, other, team)
	testenv.WaitForBundle(t, k8s, other, bundle.DefaultConfigMapName, "relabelled namespace gains the ClusterPolicy",
		func(b engine.Bundle) bool { return hasClusterPolicy(b, cp.Name) })
	labelNamespace(t, selected, "")
	_, b = testenv.WaitForBundle(t, k8s, selected, bundle.DefaultConfigMapName, "unlabelled namespace loses the ClusterPolicy",
		func(b engine.Bundle) bool { return !hasClusterPolicy(b, cp.Name) })
	if !slices.Equal(policyIDs(b), []string{"own"}) {
		t.Errorf("policies after unlabelling: %v", policyIDs(b))
	}
	if b.Revision != expectedRevision(t, selected) {
		t.Error("the republished bundle is not bundle.BuildSources of the objects and labels")
	}
	waitForClusterPolicy(t, cp.Name, "counts the namespaces after relabelling", func(cp *v1alpha1.ClusterPolicy) bool {
		return readyIs(cp.Status.Conditions, metav1.ConditionTrue, v1alpha1.ReasonPublished) && cp.Status.Namespaces == 2
	})

	// Deleted: it leaves every bundle; the namespace it alone selected has
	// nothing left to publish.
	remove(t, cp)
	testenv.WaitForBundle(t, k8s, other, bundle.DefaultConfigMapName, "ClusterPolicy gone", func(b engine.Bundle) bool { return !hasClusterPolicy(b, cp.Name) })
	testenv.Eventually(t, "bundle of the namespace the ClusterPolicy alone selected removed", func() (bool, string) {
		_, found := getBundleConfigMap(t, bare)
		return !found, "still there"
	})
}

// The operator publishes only into the namespaces it watches (--namespaces):
// a ClusterPolicy selecting every namespace leaves the others alone.
func TestClusterPolicyStaysInTheWatchedNamespaces(t *testing.T) {
	team := testenv.Namespace(t, k8s, "tg-")
	watched, unwatched := testenv.Namespace(t, k8s, "tg-"), testenv.Namespace(t, k8s, "tg-")
	labelNamespace(t, watched, team)
	labelNamespace(t, unwatched, team)
	startManager(t, controllers.Options{}, watched)
	cp := clusterPolicy(t, "watched-"+team, team, "rm")
	createCluster(t, cp)
	testenv.WaitForBundle(t, k8s, watched, bundle.DefaultConfigMapName, "published in the watched namespace",
		func(b engine.Bundle) bool { return hasClusterPolicy(b, cp.Name) })
	waitForClusterPolicy(t, cp.Name, "Ready in 1 namespace", func(cp *v1alpha1.ClusterPolicy) bool {
		return readyIs(cp.Status.Conditions, metav1.ConditionTrue, v1alpha1.ReasonPublished) && cp.Status.Namespaces == 1
	})
	if _, found := getBundleConfigMap(t, unwatched); found {
		t.Fatal("a bundle was published into a namespace the operator does not watch")
	}
}

// A ClusterPolicy whose selector does not parse (the API server does not
// check its operators) applies to every namespace, fail closed, and says
// why it is not Ready; one that does not compile says CompileError.
func TestClusterPolicyStatusSaysWhyItIsNotReady(t *testing.T) {
	team := testenv.Namespace(t, k8s, "tg-")
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)

	badSel := clusterPolicy(t, "bad-selector-"+team, team, "rm")
	badSel.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: testLabel, Operator: "Sometimes", Values: []string{team}}}}
	createCluster(t, badSel)
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "a ClusterPolicy with a broken selector applies (fail closed)",
		func(b engine.Bundle) bool { return hasClusterPolicy(b, badSel.Name) })
	got := waitForClusterPolicy(t, badSel.Name, "SelectorError", func(cp *v1alpha1.ClusterPolicy) bool {
		return readyIs(cp.Status.Conditions, metav1.ConditionFalse, v1alpha1.ReasonSelectorError)
	})
	if msg := readyOf(got.Status.Conditions).Message; !containsAll(msg, "spec.namespaceSelector", "Sometimes", "every namespace") {
		t.Errorf("SelectorError message %q", msg)
	}
	if !readyIs(got.Status.Conditions, metav1.ConditionFalse, v1alpha1.ReasonSelectorError) || stalledOf(got.Status.Conditions) == nil {
		t.Errorf("a broken selector is not Stalled: %+v", got.Status.Conditions)
	}

	labelNamespace(t, ns, team)
	badRegex := clusterPolicy(t, "bad-regex-"+team, team, "rm")
	badRegex.Spec.Rules[0].Conditions = []v1alpha1.Condition{{Field: "input.command", Operator: "matches", Value: jsonValue(`"(?=x)"`)}}
	createCluster(t, badRegex)
	got = waitForClusterPolicy(t, badRegex.Name, "CompileError", func(cp *v1alpha1.ClusterPolicy) bool {
		return readyIs(cp.Status.Conditions, metav1.ConditionFalse, v1alpha1.ReasonCompileError)
	})
	if msg := readyOf(got.Status.Conditions).Message; !containsAll(msg, "no-rm") {
		t.Errorf("CompileError message %q does not name the rule", msg)
	}
	waitForEvent(t, "default", badRegex.Name, "Warning", v1alpha1.ReasonCompileError)
}

// The acceptance: a namespace's allow does not loosen a
// ClusterPolicy's deny, and a namespace's deny still tightens what the
// cluster level allows. Decided by the engine on the bundle the operator
// published.
func TestClusterPolicyDenyNotLoosenedByNamespaceAllow(t *testing.T) {
	team := testenv.Namespace(t, k8s, "tg-")
	ns := testenv.Namespace(t, k8s, "tg-")
	labelNamespace(t, ns, team)
	startManager(t, controllers.Options{}, ns)
	cp := clusterPolicy(t, "guard-"+team, team, "rm")
	cp.Spec.Rules = append(cp.Spec.Rules, v1alpha1.Rule{ID: "ls-ok", Effect: v1alpha1.RuleAllow, Description: "ls is fine",
		Conditions: []v1alpha1.Condition{{Field: "tool_name", Operator: "eq", Value: jsonValue(`"ls"`)}}})
	createCluster(t, cp)
	local := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local"},
		Spec: v1alpha1.PolicySpec{DefaultEffect: v1alpha1.EffectAllow, Priority: 1000, Rules: []v1alpha1.Rule{
			{ID: "rm-ok-here", Effect: v1alpha1.RuleAllow, Description: "we trust rm",
				Conditions: []v1alpha1.Condition{{Field: "tool_name", Operator: "eq", Value: jsonValue(`"rm"`)}}},
			{ID: "no-ls-here", Effect: v1alpha1.RuleDeny, Description: "no ls in this namespace",
				Conditions: []v1alpha1.Condition{{Field: "tool_name", Operator: "eq", Value: jsonValue(`"ls"`)}}},
		}}}
	create(t, local)
	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "both levels published",
		func(b engine.Bundle) bool { return hasClusterPolicy(b, cp.Name) && len(b.Policies) == 2 })
	c, diags := engine.Compile(b)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if r := c.Evaluate(engine.Request{"tool_name": "rm", "agent_id": "bot"}, engine.EvalOptions{}); r.Decision != engine.Deny ||
		r.MatchedPolicyID != cp.Name || r.MatchedPolicyKind != engine.KindClusterPolicy {
		t.Errorf("rm: %s by %s %q, want deny by the ClusterPolicy %s: a namespace's allow loosened the cluster level",
			r.Decision, r.MatchedPolicyKind, r.MatchedPolicyID, cp.Name)
	}
	if r := c.Evaluate(engine.Request{"tool_name": "ls", "agent_id": "bot"}, engine.EvalOptions{}); r.Decision != engine.Deny ||
		r.MatchedPolicyID != "local" || r.MatchedPolicyKind != engine.KindPolicy {
		t.Errorf("ls: %s by %s %q, want deny by the namespace's Policy local", r.Decision, r.MatchedPolicyKind, r.MatchedPolicyID)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func stalledOf(conds []metav1.Condition) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == v1alpha1.ConditionStalled && conds[i].Status == metav1.ConditionTrue {
			return &conds[i]
		}
	}
	return nil
}

// A ClusterPolicy created once reaches every namespace it selects, and its
// status counts them once they all carry it; the test logs how long each
// took (the publish path of a guardrail across many namespaces).
func TestClusterPolicyReachesManyNamespaces(t *testing.T) {
	const n = 30
	team := testenv.Namespace(t, k8s, "tg-")
	namespaces := make([]string, n)
	for i := range namespaces {
		namespaces[i] = testenv.Namespace(t, k8s, "tg-")
		labelNamespace(t, namespaces[i], team)
	}
	startManager(t, controllers.Options{}, namespaces...)
	// The manager has started its controllers once it published this.
	create(t, policy(namespaces[n-1], "warm-up", 1))
	testenv.WaitForBundle(t, k8s, namespaces[n-1], bundle.DefaultConfigMapName, "the manager publishing", nil)
	cp := clusterPolicy(t, "everywhere-"+team, team, "rm")
	start := time.Now()
	createCluster(t, cp)
	var first time.Duration
	for i, ns := range namespaces {
		testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the ClusterPolicy in "+ns,
			func(b engine.Bundle) bool { return hasClusterPolicy(b, cp.Name) })
		if i == 0 {
			first = time.Since(start)
		}
	}
	published := time.Since(start)
	waitForClusterPolicy(t, cp.Name, fmt.Sprintf("Ready in %d namespaces", n), func(cp *v1alpha1.ClusterPolicy) bool {
		return readyIs(cp.Status.Conditions, metav1.ConditionTrue, v1alpha1.ReasonPublished) && cp.Status.Namespaces == n
	})
	t.Logf("ClusterPolicy create -> in the first namespace's bundle: %d ms; in all %d: %d ms; -> status Ready with namespaces=%d: %d ms",
		first.Milliseconds(), n, published.Milliseconds(), n, time.Since(start).Milliseconds())
}
