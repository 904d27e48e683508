package freeze

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

func clusterFreeze(t *testing.T, name string) *v1alpha1.ClusterFrozenAgent {
	t.Helper()
	var cf v1alpha1.ClusterFrozenAgent
	switch err := k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, &cf); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		t.Fatal(err)
	}
	return &cf
}

// removeClusterAfter deletes ClusterFrozenAgents a test leaves behind.
func removeClusterAfter(t *testing.T, names ...string) {
	t.Cleanup(func() {
		for _, n := range names {
			cf := &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: n}}
			if err := k8sClient.Delete(context.Background(), cf); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleaning up %s: %v", n, err)
			}
		}
	})
}

// toolgate freeze --all-namespaces creates a ClusterFrozenAgent (named as
// a FrozenAgent would be), its namespaceSelector from --selector;
// unfreeze --all-namespaces deletes it.
func TestFreezeAllNamespacesThenUnfreeze(t *testing.T) {
	removeClusterAfter(t, "freeze-bot")
	code, out := toolgate(t, "freeze", "--all-namespaces", "--selector", "team=payments,tier notin (dev)", "bot",
		"--kubeconfig", kubeconfig, "--reason", "INC-9: runaway refunds", "--for", "2h", "--wait=false")
	if code != 0 || !strings.Contains(out, "clusterfrozenagent freeze-bot created") {
		t.Fatalf("freeze: exit %d\n%s", code, out)
	}
	cf := clusterFreeze(t, "freeze-bot")
	if cf == nil {
		t.Fatal("no ClusterFrozenAgent freeze-bot")
	}
	sel := cf.Spec.NamespaceSelector
	if cf.Spec.AgentID != "bot" || cf.Spec.Reason != "INC-9: runaway refunds" || cf.Spec.ExpiresAt == nil ||
		sel == nil || sel.MatchLabels["team"] != "payments" || len(sel.MatchExpressions) != 1 ||
		sel.MatchExpressions[0].Operator != metav1.LabelSelectorOpNotIn ||
		cf.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByCLIValue {
		t.Errorf("ClusterFrozenAgent %+v", cf)
	}
	if until := time.Until(cf.Spec.ExpiresAt.Time); until < time.Hour || until > 2*time.Hour {
		t.Errorf("expiresAt %v", cf.Spec.ExpiresAt)
	}
	// The same freeze again is found, not duplicated.
	if code, out := toolgate(t, "freeze", "-A", "-l", "team=payments,tier notin (dev)", "BOT", "--name", "freeze-bot",
		"--kubeconfig", kubeconfig, "--wait=false"); code != 0 || !strings.Contains(out, "already freezes") {
		t.Errorf("freeze again: exit %d\n%s", code, out)
	}
	// A namespaced unfreeze does not lift a cluster freeze.
	if code, _ := toolgate(t, "unfreeze", "bot", "-n", watched, "--kubeconfig", kubeconfig); code != 1 || clusterFreeze(t, "freeze-bot") == nil {
		t.Errorf("namespaced unfreeze: exit %d, cluster freeze %v", code, clusterFreeze(t, "freeze-bot") != nil)
	}
	code, out = toolgate(t, "unfreeze", "--all-namespaces", "Bot", "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "clusterfrozenagent freeze-bot deleted") || clusterFreeze(t, "freeze-bot") != nil {
		t.Fatalf("unfreeze: exit %d\n%s", code, out)
	}
	if code, out := toolgate(t, "unfreeze", "--all-namespaces", "bot", "--kubeconfig", kubeconfig); code != 1 || !strings.Contains(out, `no ClusterFrozenAgent freezes "bot"`) {
		t.Errorf("unfreeze of nothing: exit %d\n%s", code, out)
	}
}

// --all and --service-account freeze across namespaces too; unfreeze
// --selector lifts only the freezes with that selector.
func TestFreezeAllNamespacesEveryAgentAndServiceAccount(t *testing.T) {
	removeClusterAfter(t, allAgentsName, "freeze-sa-billing", "search-billing")
	k := []string{"--kubeconfig", kubeconfig, "--wait=false"}
	if code, out := toolgate(t, append([]string{"freeze", "-A", "--all", "--reason", "stop everything"}, k...)...); code != 0 {
		t.Fatalf("--all: exit %d\n%s", code, out)
	}
	if cf := clusterFreeze(t, allAgentsName); cf == nil || !cf.Spec.AllAgents || cf.Spec.NamespaceSelector != nil {
		t.Fatalf("--all: %+v", cf)
	}
	if code, out := toolgate(t, append([]string{"freeze", "-A", "-l", "team=payments", "--service-account", "billing"}, k...)...); code != 0 {
		t.Fatalf("--service-account: exit %d\n%s", code, out)
	}
	if code, out := toolgate(t, append([]string{"freeze", "-A", "-l", "team=search", "--service-account", "billing", "--name", "search-billing"}, k...)...); code != 0 {
		t.Fatalf("--service-account, team=search: exit %d\n%s", code, out)
	}
	if cf := clusterFreeze(t, "freeze-sa-billing"); cf == nil || cf.Spec.ServiceAccount != "billing" || cf.Spec.AgentID != "" {
		t.Fatalf("--service-account: %+v", cf)
	}
	// Another selector under a taken name is refused, not merged.
	if code, out := toolgate(t, append([]string{"freeze", "-A", "-l", "team=search", "--service-account", "billing"}, k...)...); code != 2 ||
		!strings.Contains(out, "ClusterFrozenAgent freeze-sa-billing already freezes") || !strings.Contains(out, "team=payments") {
		t.Errorf("another selector under a taken name: exit %d\n%s", code, out)
	}
	code, out := toolgate(t, "unfreeze", "-A", "-l", "team=search", "--service-account", "billing", "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "search-billing deleted") || clusterFreeze(t, "freeze-sa-billing") == nil {
		t.Fatalf("unfreeze --selector: exit %d\n%s", code, out)
	}
	code, out = toolgate(t, "unfreeze", "-A", "--all", "--kubeconfig", kubeconfig)
	if code != 0 || clusterFreeze(t, allAgentsName) != nil || clusterFreeze(t, "freeze-sa-billing") == nil {
		t.Fatalf("unfreeze --all: exit %d\n%s", code, out)
	}
}

// freeze -A waits until the operator (the suite's manager, watching one
// namespace) says the freeze is published: Ready, with how many namespaces.
// Past --timeout it exits 1, the freeze created all the same.
func TestFreezeAllNamespacesWaitsForReady(t *testing.T) {
	removeClusterAfter(t, "freeze-waiter", "freeze-nobody-home")
	code, out := toolgate(t, "freeze", "-A", "waiter", "--kubeconfig", kubeconfig, "--timeout", "30s")
	if code != 0 || !strings.Contains(out, "waiter is frozen in every namespace: the operator confirmed it published to 1 namespaces") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if cf := clusterFreeze(t, "freeze-waiter"); cf == nil || cf.Status.Namespaces != 1 || !meta.IsStatusConditionTrue(cf.Status.Conditions, v1alpha1.ConditionReady) {
		t.Fatalf("status: %+v", cf)
	}
	// No operator confirms a freeze within a millisecond.
	code, out = toolgate(t, "freeze", "-A", "nobody-home", "--kubeconfig", kubeconfig, "--timeout", "1ms")
	if code != 1 || !strings.Contains(out, "clusterfrozenagent freeze-nobody-home created") || !strings.Contains(out, "not confirmed live after 1ms") {
		t.Fatalf("past --timeout: exit %d\n%s", code, out)
	}
}

// Every mistake is caught before anything is created, with exit 2.
func TestFreezeAllNamespacesRejectsMalformedFlags(t *testing.T) {
	k := []string{"--kubeconfig", kubeconfig, "--wait=false"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"freeze", "bob", "--selector", "team=a"}, "--selector chooses namespaces: give it with --all-namespaces"},
		{[]string{"freeze", "bob", "-A", "-n", watched}, "--all-namespaces freezes across namespaces: give no --namespace"},
		{[]string{"freeze", "bob", "-A", "--selector", "team in (a"}, `--selector "team in (a"`},
		{[]string{"freeze", "bob", "-A", "--selector", "bad key=x"}, `--selector "bad key=x"`},
		{[]string{"freeze", "bob", "-A", "--selector", "team=" + strings.Repeat("v", 64)}, "--selector"},
		{[]string{"freeze", "-A"}, "exactly one agent id, not 0"},
		{[]string{"freeze", "-A", "--all", "bob"}, "give no AGENT_ID"},
		{[]string{"freeze", "-A", " bob"}, "whitespace"},
		{[]string{"freeze", "-A", "bob", "--for", "-1h"}, "--for must be positive"},
		{[]string{"unfreeze", "bob", "--selector", "team=a"}, "--selector chooses namespaces: give it with --all-namespaces"},
		{[]string{"unfreeze", "bob", "-A", "-n", watched}, "give no --namespace"},
		{[]string{"unfreeze", "bob", "-A", "-l", "!!"}, `--selector "!!"`},
		{[]string{"unfreeze", "-A"}, "exactly one agent id"},
	} {
		args := append(append([]string{}, tc.args...), k...)
		if tc.args[0] == "unfreeze" {
			args = append(append([]string{}, tc.args...), "--kubeconfig", kubeconfig)
		}
		code, out := toolgate(t, args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, out)
		}
	}
	var list v1alpha1.ClusterFrozenAgentList
	if err := k8sClient.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	for _, cf := range list.Items {
		if cf.Name == "freeze-bob" {
			t.Errorf("a rejected command created %s", cf.Name)
		}
	}
}

// A namespaced unfreeze says which ClusterFrozenAgents still freeze the
// agent in that namespace, and leaves them alone.
func TestUnfreezeNamesTheClusterFreezesLeft(t *testing.T) {
	removeClusterAfter(t, "carol-everywhere", "carol-nowhere")
	removeAfter(t, watched, "freeze-carol")
	ctx := context.Background()
	for name, sel := range map[string]*metav1.LabelSelector{
		"carol-everywhere": nil,
		"carol-nowhere":    {MatchLabels: map[string]string{"team": "nowhere"}},
	} {
		if err := k8sClient.Create(ctx, &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ClusterFrozenAgentSpec{FrozenAgentSpec: v1alpha1.FrozenAgentSpec{AgentID: "carol"}, NamespaceSelector: sel}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8sClient.Create(ctx, &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "freeze-carol"},
		Spec: v1alpha1.FrozenAgentSpec{AgentID: "carol"}}); err != nil {
		t.Fatal(err)
	}
	code, out := toolgate(t, "unfreeze", "Carol", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "frozenagent agents/freeze-carol deleted") ||
		!strings.Contains(out, "still frozen: ClusterFrozenAgent carol-everywhere freezes carol in every namespace (toolgate unfreeze --all-namespaces lifts it)") ||
		strings.Contains(out, "carol-nowhere") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if clusterFreeze(t, "carol-everywhere") == nil {
		t.Error("a namespaced unfreeze deleted a ClusterFrozenAgent")
	}
	// Only cluster freezes left: nothing to delete here (exit 1), and the
	// command says where the freeze comes from.
	code, out = toolgate(t, "unfreeze", "carol", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 1 || !strings.Contains(out, "ClusterFrozenAgent carol-everywhere") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}
