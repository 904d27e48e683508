package freeze

import (
	"context"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// allAgentsFreezes is the namespace's FrozenAgents with allAgents, by name.
func allAgentsFreezes(t *testing.T, ns string) map[string]v1alpha1.FrozenAgent {
	t.Helper()
	var list v1alpha1.FrozenAgentList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]v1alpha1.FrozenAgent{}
	for _, fa := range list.Items {
		if fa.Spec.AllAgents {
			out[fa.Name] = fa
		}
	}
	return out
}

// toolgate freeze --all creates one FrozenAgent with allAgents: true and
// returns once the real operator reports it live; the bundle the sidecars
// read then freezes every agent, and the operator's status says so.
func TestFreezeAllWaitsUntilLive(t *testing.T) {
	removeAfter(t, watched, "freeze-all-agents")
	code, out := toolgate(t, "freeze", "--all", "-n", watched, "--kubeconfig", kubeconfig, "--reason", "INC-77: every agent stops", "--for", "1h")
	if code != 0 || !strings.Contains(out, "frozenagent agents/freeze-all-agents created") ||
		!regexp.MustCompile(`every agent is frozen in agents: the operator confirmed it live in bundle sha256:[0-9a-f]{64} after \d+ ms`).MatchString(out) {
		t.Fatalf("freeze --all: exit %d\n%s", code, out)
	}
	var fa v1alpha1.FrozenAgent
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: watched, Name: "freeze-all-agents"}, &fa); err != nil {
		t.Fatal(err)
	}
	if !fa.Spec.AllAgents || fa.Spec.AgentID != "" || fa.Spec.ServiceAccount != "" || fa.Spec.Reason != "INC-77: every agent stops" ||
		fa.Spec.ExpiresAt == nil || fa.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByCLIValue {
		t.Errorf("FrozenAgent %+v, labels %v", fa.Spec, fa.Labels)
	}
	t.Log(out)
	// Live means published: the bundle already freezes every agent.
	found := false
	for _, f := range frozenIn(t, watched) {
		found = found || (f.All && f.ID == "" && f.ServiceAccount == "" && f.Reason == "INC-77: every agent stops")
	}
	if !found {
		t.Errorf("bundle freezes %+v", frozenIn(t, watched))
	}
	ready := meta.FindStatusCondition(fa.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || !strings.Contains(ready.Message, "every agent of the namespace is denied every call (AGENT_FROZEN)") {
		t.Errorf("Ready = %+v", ready)
	}

	// Again: the same freeze, waited for, not an error.
	if code, out := toolgate(t, "freeze", "--all", "-n", watched, "--kubeconfig", kubeconfig); code != 0 || !strings.Contains(out, "frozenagent agents/freeze-all-agents already freezes every agent") {
		t.Errorf("second freeze --all: exit %d\n%s", code, out)
	}
}

// toolgate unfreeze --all deletes the FrozenAgents with allAgents, whatever
// their names, and only those: the freezes of one agent or one
// ServiceAccount stay.
func TestUnfreezeAllLeavesOtherFreezes(t *testing.T) {
	removeAfter(t, watched, "stop-all-1", "stop-all-2", "keep-agent", "keep-sa")
	for name, spec := range map[string]v1alpha1.FrozenAgentSpec{
		"stop-all-1": {AllAgents: true},
		"stop-all-2": {AllAgents: true, Reason: "second"},
		"keep-agent": {AgentID: "keep-me"},
		"keep-sa":    {ServiceAccount: "keep-sa"},
	} {
		fa := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: name}, Spec: spec}
		if err := k8sClient.Create(context.Background(), fa); err != nil {
			t.Fatal(err)
		}
	}
	// Lifting one agent's freeze says that every agent is still frozen.
	code, out := toolgate(t, "unfreeze", "keep-me", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "frozenagent agents/keep-agent deleted") ||
		!strings.Contains(out, "still frozen: FrozenAgent agents/stop-all-1 freezes every agent of the namespace (toolgate unfreeze --all lifts it)") ||
		!strings.Contains(out, "FrozenAgent agents/stop-all-2 freezes every agent") {
		t.Fatalf("unfreeze keep-me: exit %d\n%s", code, out)
	}
	if err := k8sClient.Create(context.Background(), &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "keep-agent"},
		Spec: v1alpha1.FrozenAgentSpec{AgentID: "keep-me"}}); err != nil {
		t.Fatal(err)
	}

	code, out = toolgate(t, "unfreeze", "--all", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "frozenagent agents/stop-all-1 deleted (it froze every agent of the namespace)") ||
		!strings.Contains(out, "frozenagent agents/stop-all-2 deleted (it froze every agent of the namespace)") ||
		strings.Count(out, " deleted") != 2 {
		t.Fatalf("unfreeze --all: exit %d\n%s", code, out)
	}
	for _, name := range []string{"keep-agent", "keep-sa"} {
		var fa v1alpha1.FrozenAgent
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: watched, Name: name}, &fa); err != nil {
			t.Errorf("%s after unfreeze --all: %v", name, err)
		}
	}
	if left := allAgentsFreezes(t, watched); len(left) != 0 {
		t.Errorf("allAgents freezes left: %v", left)
	}
	code, out = toolgate(t, "unfreeze", "--all", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 1 || !strings.Contains(out, "no FrozenAgent in agents freezes every agent of the namespace") {
		t.Errorf("unfreeze --all of nothing: exit %d\n%s", code, out)
	}
}

// --all stands for every agent: beside an agent id or a ServiceAccount it
// is a usage error, refused before anything reaches the cluster.
func TestFreezeAllRefusesATargetBesideIt(t *testing.T) {
	k := []string{"-n", watched, "--kubeconfig", kubeconfig}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"freeze", "bob", "--all"}, `--all stands for every agent of the namespace: give no AGENT_ID ("bob") beside it`},
		{[]string{"freeze", "--all", "--service-account", "billing-bot"}, "--all stands for every agent of the namespace: give no --service-account beside it"},
		{[]string{"freeze", "bob", "--all", "--service-account", "billing-bot"}, "give no AGENT_ID"},
		{[]string{"freeze", "--all", "--service-account", ""}, "--service-account needs a ServiceAccount name"},
		{[]string{"freeze", "--all", "--reason", strings.Repeat("r", v1alpha1.MaxReasonLength+1)}, "--reason: reason is"},
		{[]string{"freeze", "--all", "--for", "-1h"}, "--for must be positive"},
		{[]string{"freeze", "--all", "--name", "Bad_Name"}, "--name"},
		{[]string{"freeze", "--all", "-n", "Bad_NS"}, "--namespace"},
		{[]string{"unfreeze", "bob", "--all"}, `give no AGENT_ID ("bob") beside it`},
		{[]string{"unfreeze", "--all", "--service-account", "billing-bot"}, "give no --service-account beside it"},
		{[]string{"unfreeze", "--all", "-n", "Bad_NS"}, "--namespace"},
	} {
		args := append(append([]string{}, tc.args[:1]...), k...)
		args = append(args, tc.args[1:]...)
		code, out := toolgate(t, args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, out)
		}
	}
	if left := allAgentsFreezes(t, watched); len(left) != 0 {
		t.Errorf("a refused command created %v", left)
	}
	var fa v1alpha1.FrozenAgent
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: watched, Name: "freeze-bob"}, &fa); !apierrors.IsNotFound(err) {
		t.Errorf("a refused command created freeze-bob: %v", err)
	}
}

// The default name freeze-all-agents is also the default name of a freeze
// of the agent "all-agents": neither command takes the other's object for
// its own.
func TestFreezeAllRefusesAnAgentsName(t *testing.T) {
	removeAfter(t, watched, "freeze-all-agents", "stop-everything")
	fa := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "freeze-all-agents"}, Spec: v1alpha1.FrozenAgentSpec{AgentID: "all-agents"}}
	if err := k8sClient.Create(context.Background(), fa); err != nil {
		t.Fatal(err)
	}
	code, out := toolgate(t, "freeze", "--all", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 2 || !strings.Contains(out, `FrozenAgent agents/freeze-all-agents already freezes agent "all-agents", not every agent of the namespace: choose another --name`) {
		t.Fatalf("freeze --all over an agent's freeze: exit %d\n%s", code, out)
	}
	code, out = toolgate(t, "freeze", "--all", "--name", "stop-everything", "--wait=false", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "frozenagent agents/stop-everything created") {
		t.Fatalf("freeze --all --name: exit %d\n%s", code, out)
	}
	if _, ok := allAgentsFreezes(t, watched)["stop-everything"]; !ok {
		t.Errorf("stop-everything is not an allAgents freeze: %v", allAgentsFreezes(t, watched))
	}
	code, out = toolgate(t, "freeze", "all-agents", "--name", "stop-everything", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 2 || !strings.Contains(out, `FrozenAgent agents/stop-everything already freezes every agent of the namespace, not agent "all-agents": choose another --name`) {
		t.Errorf("freeze all-agents over an allAgents freeze: exit %d\n%s", code, out)
	}
}
