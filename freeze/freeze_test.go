package freeze

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/cli"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// toolgate runs the command as the binary would: through cli.Execute, so
// the exit code is the process's.
func toolgate(t *testing.T, args ...string) (int, string) {
	t.Helper()
	root := cli.NewRootCommand(NewFreezeCommand(), NewUnfreezeCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	return cli.Execute(root), out.String()
}

func frozenIn(t *testing.T, ns string) []engine.FrozenAgent {
	t.Helper()
	var cm corev1.ConfigMap
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "toolgate-bundle"}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	raw, gzipped, err := bundle.FromConfigMap(&cm)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := bundle.ReadDocument(raw, gzipped)
	if err != nil {
		t.Fatal(err)
	}
	b, err := engine.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b.FrozenAgents
}

func frozenAgent(t *testing.T, ns, id string) *engine.FrozenAgent {
	t.Helper()
	for _, f := range frozenIn(t, ns) {
		if f.ID == id {
			return &f
		}
	}
	return nil
}

func TestFreezeWaitsUntilLiveThenUnfreeze(t *testing.T) {
	code, out := toolgate(t, "freeze", "billing-bot-7", "-n", watched, "--kubeconfig", kubeconfig,
		"--reason", "INC-1234: looping on refunds", "--for", "2h")
	if code != 0 || !regexp.MustCompile(`billing-bot-7 is frozen in agents: the operator confirmed it live in bundle sha256:[0-9a-f]{64} after \d+ ms`).MatchString(out) {
		t.Fatalf("freeze: exit %d\n%s", code, out)
	}
	// Live means published: the bundle the sidecars read already has it.
	if f := frozenAgent(t, watched, "billing-bot-7"); f == nil || f.Reason != "INC-1234: looping on refunds" {
		t.Fatalf("bundle freezes %+v", frozenIn(t, watched))
	}
	var fa v1alpha1.FrozenAgent
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: watched, Name: "freeze-billing-bot-7"}, &fa); err != nil {
		t.Fatal(err)
	}
	if fa.Spec.ExpiresAt == nil || time.Until(fa.Spec.ExpiresAt.Time) < 119*time.Minute || time.Until(fa.Spec.ExpiresAt.Time) > 2*time.Hour {
		t.Errorf("expiresAt %v, want about 2h from now", fa.Spec.ExpiresAt)
	}

	// Again: the same freeze, waited for, not an error.
	if code, out := toolgate(t, "freeze", "billing-bot-7", "-n", watched, "--kubeconfig", kubeconfig); code != 0 || !strings.Contains(out, "already freezes billing-bot-7") {
		t.Errorf("second freeze: exit %d\n%s", code, out)
	}
	if code, out := toolgate(t, "freeze", "billing-bot-7", "-n", watched, "--kubeconfig", kubeconfig, "--reason", "other"); code != 0 || !strings.Contains(out, "its reason and expiry are kept") {
		t.Errorf("second freeze with another reason: exit %d\n%s", code, out)
	}

	// Unfreeze matches as the engine does: case-insensitively.
	if code, out := toolgate(t, "unfreeze", "BILLING-bot-7", "-n", watched, "--kubeconfig", kubeconfig); code != 0 || !strings.Contains(out, "freeze-billing-bot-7 deleted") {
		t.Fatalf("unfreeze: exit %d\n%s", code, out)
	}
	testenv.Eventually(t, "billing-bot-7 out of the bundle after unfreeze", func() (bool, string) {
		return frozenAgent(t, watched, "billing-bot-7") == nil, "still frozen"
	})
	if code, out := toolgate(t, "unfreeze", "billing-bot-7", "-n", watched, "--kubeconfig", kubeconfig); code != 1 || !strings.Contains(out, `no FrozenAgent in agents freezes "billing-bot-7"`) {
		t.Errorf("unfreeze of nothing: exit %d\n%s", code, out)
	}
}

// Unfreeze removes every FrozenAgent for the agent, whatever its name.
func TestUnfreezeRemovesHandWrittenFreezes(t *testing.T) {
	for _, name := range []string{"by-hand-1", "by-hand-2"} {
		fa := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: name}, Spec: v1alpha1.FrozenAgentSpec{AgentID: "Eve"}}
		if err := k8sClient.Create(context.Background(), fa); err != nil {
			t.Fatal(err)
		}
	}
	code, out := toolgate(t, "unfreeze", "eve", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 0 || strings.Count(out, " deleted") != 2 {
		t.Fatalf("unfreeze: exit %d\n%s", code, out)
	}
}

// removeAfter deletes FrozenAgents a test leaves behind, so the tests can
// run again (-count) against the same API server.
func removeAfter(t *testing.T, ns string, names ...string) {
	t.Cleanup(func() {
		for _, n := range names {
			fa := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}
			if err := k8sClient.Delete(context.Background(), fa); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleaning up %s/%s: %v", ns, n, err)
			}
		}
	})
}

func TestFreezeWithoutAnOperatorSaysSo(t *testing.T) {
	removeAfter(t, unwatched, "freeze-mallory", "freeze-trudy")
	code, out := toolgate(t, "freeze", "mallory", "-n", unwatched, "--kubeconfig", kubeconfig, "--timeout", "1s")
	if code != 1 || !strings.Contains(out, "created") || !strings.Contains(out, "not confirmed live after 1s") || !strings.Contains(out, "is the toolgate operator running") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// --wait=false only creates.
	if code, out := toolgate(t, "freeze", "trudy", "-n", unwatched, "--kubeconfig", kubeconfig, "--wait=false"); code != 0 || !strings.Contains(out, "created") {
		t.Fatalf("--wait=false: exit %d\n%s", code, out)
	}
}

func TestFreezeRefusesToReuseAnotherAgentsName(t *testing.T) {
	removeAfter(t, watched, "freeze-taken")
	fa := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "freeze-taken"}, Spec: v1alpha1.FrozenAgentSpec{AgentID: "someone-else"}}
	if err := k8sClient.Create(context.Background(), fa); err != nil {
		t.Fatal(err)
	}
	code, out := toolgate(t, "freeze", "bob", "--name", "freeze-taken", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 2 || !strings.Contains(out, `already freezes "someone-else", not "bob"`) {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// Every mistake is caught before anything is created, with exit 2.
func TestFreezeRejectsMalformedInput(t *testing.T) {
	k := []string{"-n", watched, "--kubeconfig", kubeconfig}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"freeze"}, "exactly one agent id, not 0"},
		{[]string{"freeze", "a", "b"}, "exactly one agent id, not 2"},
		{[]string{"freeze", ""}, "AGENT_ID: agentId, serviceAccount or allAgents: true is required"},
		{[]string{"freeze", " bob"}, "whitespace"},
		{[]string{"freeze", strings.Repeat("a", v1alpha1.MaxAgentIDLength+1)}, "more than"},
		{[]string{"freeze", "bob", "--reason", strings.Repeat("r", v1alpha1.MaxReasonLength+1)}, "--reason: reason is"},
		{[]string{"unfreeze", " bob"}, "whitespace"},
		{[]string{"freeze", "bob", "--for", "-1h"}, "--for must be positive"},
		{[]string{"freeze", "bob", "--for", "soon"}, "invalid argument"},
		{[]string{"freeze", "bob", "--for", "1h", "--until", "2099-01-01T00:00:00Z"}, "give one"},
		{[]string{"freeze", "bob", "--until", "tomorrow"}, "not an RFC 3339 time"},
		{[]string{"freeze", "bob", "--until", "2001-01-01T00:00:00Z"}, "has passed"},
		{[]string{"freeze", "bob", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"freeze", "bob", "--name", "Bad_Name"}, "--name"},
		{[]string{"freeze", "bob", "--no-such-flag"}, "unknown flag"},
		{[]string{"freeze", "bob", "-n", "Bad_NS"}, "--namespace"},
		{[]string{"unfreeze"}, "exactly one agent id"},
		{[]string{"unfreeze", "bob", "-n", "Bad_NS"}, "--namespace"},
		{[]string{"unfreeze", "--service-account", ""}, "--service-account needs a ServiceAccount name"},
		{[]string{"unfreeze", "bob", "--service-account", "billing-bot"}, "give an agent id or --service-account, not both"},
		{[]string{"unfreeze", "--service-account", "Not_A_Name"}, `--service-account: serviceAccount "Not_A_Name" is not a ServiceAccount name`},
		{[]string{"unfreeze", "--service-account", strings.Repeat("a", v1alpha1.MaxServiceAccountLength+1)}, "is not a ServiceAccount name"},
		{[]string{"unfreeze", "--service-account", "billing-bot", "-n", "Bad_NS"}, "--namespace"},
		{[]string{"freeze", "--service-account", ""}, "--service-account needs a ServiceAccount name"},
	} {
		args := append(append([]string{}, tc.args[:1]...), k...)
		args = append(args, tc.args[1:]...)
		code, out := toolgate(t, args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, out)
		}
	}
	var list v1alpha1.FrozenAgentList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(watched), client.MatchingFields{"metadata.name": "freeze-bob"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("a rejected command created %s", list.Items[0].Name)
	}
}

func TestFreezeWithoutACluster(t *testing.T) {
	code, out := toolgate(t, "freeze", "bob", "--kubeconfig", "/nonexistent/kubeconfig")
	if code != 2 || !strings.Contains(out, "no cluster to talk to") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// toolgate freeze --service-account freezes by service account, alone or
// beside an agent id, and the operator publishes it in the bundle.
func TestFreezeByServiceAccount(t *testing.T) {
	code, out := toolgate(t, "freeze", "--service-account", "billing-bot", "-n", watched, "--kubeconfig", kubeconfig, "--reason", "INC-SA")
	if code != 0 || !strings.Contains(out, `frozenagent agents/freeze-sa-billing-bot created`) ||
		!strings.Contains(out, `service account "billing-bot" is frozen in agents: the operator confirmed it live in bundle sha256:`) {
		t.Fatalf("freeze --service-account: exit %d\n%s", code, out)
	}
	found := false
	for _, f := range frozenIn(t, watched) {
		found = found || (f.ID == "" && f.ServiceAccount == "billing-bot" && f.Reason == "INC-SA")
	}
	if !found {
		t.Errorf("bundle freezes %+v", frozenIn(t, watched))
	}
	code, out = toolgate(t, "freeze", "--service-account", "Not A Name", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 2 || !strings.Contains(out, "--service-account: serviceAccount \"Not A Name\" is not a ServiceAccount name") {
		t.Errorf("bad --service-account: exit %d\n%s", code, out)
	}
	// The same name for another target is refused, not reused.
	code, out = toolgate(t, "freeze", "--service-account", "other-bot", "--name", "freeze-sa-billing-bot", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 2 || !strings.Contains(out, `already freezes service account "billing-bot", not service account "other-bot"`) {
		t.Errorf("name taken: exit %d\n%s", code, out)
	}
}

// toolgate unfreeze --service-account deletes every FrozenAgent that
// freezes that ServiceAccount, alone or beside an agent id, compared as
// sidecars compare it; freezes of agent ids or of other ServiceAccounts
// stay.
func TestUnfreezeByServiceAccount(t *testing.T) {
	removeAfter(t, watched, "sa-alone", "sa-and-agent", "sa-other", "agent-only")
	for name, spec := range map[string]v1alpha1.FrozenAgentSpec{
		"sa-alone":     {ServiceAccount: "lift-bot"},
		"sa-and-agent": {AgentID: "lift-agent", ServiceAccount: "lift-bot"},
		"sa-other":     {ServiceAccount: "lift-bot-2"},
		"agent-only":   {AgentID: "lift-bot"}, // an agent id that happens to read the same
	} {
		fa := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: name}, Spec: spec}
		if err := k8sClient.Create(context.Background(), fa); err != nil {
			t.Fatal(err)
		}
	}
	code, out := toolgate(t, "unfreeze", "--service-account", "lift-bot", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, `frozenagent agents/sa-alone deleted (it froze service account "lift-bot")`) ||
		!strings.Contains(out, `frozenagent agents/sa-and-agent deleted (it froze agent "lift-agent" and service account "lift-bot")`) ||
		strings.Count(out, " deleted") != 2 {
		t.Fatalf("unfreeze --service-account: exit %d\n%s", code, out)
	}
	var list v1alpha1.FrozenAgentList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(watched)); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, fa := range list.Items {
		left[fa.Name] = true
	}
	if left["sa-alone"] || left["sa-and-agent"] || !left["sa-other"] || !left["agent-only"] {
		t.Errorf("FrozenAgents left: %v", left)
	}
	code, out = toolgate(t, "unfreeze", "--service-account", "lift-bot", "-n", watched, "--kubeconfig", kubeconfig)
	if code != 1 || !strings.Contains(out, `no FrozenAgent in agents freezes service account "lift-bot"`) {
		t.Errorf("unfreeze of nothing: exit %d\n%s", code, out)
	}
}
