package sharedlimits

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// askBundle limits pay to max calls an hour across the namespace, in the
// shared store, and asks a person for every pay under that limit.
func askBundle(max int64) engine.Bundle {
	return engine.Bundle{Policies: []engine.Policy{{ID: "limits", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "pay-per-namespace", Effect: "deny", Description: "pay is limited across the namespace",
			Targets: &engine.Targets{Tools: []string{"pay"}},
			When:    &engine.When{RateLimit: &engine.Limit{Max: max, Window: "1h", Per: engine.PerNamespace, Store: engine.StoreShared}}},
		{ID: "pay-asks", Effect: "ask", Description: "a person approves every payment",
			Targets: &engine.Targets{Tools: []string{"pay"}}},
	}}}}
}

// A call a person approved is counted in the shared store when it is let
// through, like any allowed call: a real sidecar on a real API server
// (ApprovalRequests, `toolgate approve`) and a real redis-server. Asking
// counts nothing; each approved call counts one; a store that is down
// denies the approved call USAGE_UNAVAILABLE and leaves the approval
// unused, to be used once the store answers; an approved call refused
// after its reservation (the approval cannot be marked used) is given
// back, as is one whose rule changed; and once approved calls reach the
// limit, every sidecar of the namespace denies by it.
func TestAnApprovedCallIsCountedInTheSharedStore(t *testing.T) {
	r := redistest.Start(t)
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	b := askBundle(2)
	rev := publish(t, admin, b)
	kubeconfig := testenv.WriteKubeconfig(t, testenv.Kubeconfig(t, cfg))
	p := startSidecar(t, "--configmap="+namespace+"/toolgate-bundle", "--kubeconfig="+kubeconfig,
		"--service-account=pay-agent", "--usage-store="+storeURL(r))
	rc := redis.NewClient(&redis.Options{Addr: r.Addr, Protocol: 2})
	t.Cleanup(func() { _ = rc.Close() })
	counted := func() int64 {
		t.Helper()
		keys, err := rc.Keys(ctx, "toolgate:{default/"+namespace+"}:Policy/limits/pay-per-namespace/rateLimit:*").Result()
		if err != nil || len(keys) > 1 {
			t.Fatalf("the limit's keys: %v %v", keys, err)
		}
		if len(keys) == 0 {
			return 0
		}
		n, err := rc.ZCard(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	approve := func(name string) {
		t.Helper()
		out, err := exec.Command(toolgateBin, "approve", name, "-n", namespace, "--kubeconfig", kubeconfig, "-m", "ok").CombinedOutput()
		if err != nil {
			t.Fatalf("toolgate approve %s: %v\n%s", name, err, out)
		}
	}
	// asked asks for a payment of amount and returns the ApprovalRequest
	// it waits on.
	asked := func(amount int) string {
		t.Helper()
		a := p.evaluate(map[string]any{"tool_name": "pay", "agent_id": "pay-bot", "input": map[string]any{"amount": amount}})
		if a.Decision != engine.Ask || a.rule() != "pay-asks" || a.Approval == nil {
			t.Fatalf("pay %d: %+v, want ask by pay-asks with an ApprovalRequest", amount, a)
		}
		return a.Approval.Name
	}
	use := func(amount int, name string) answer {
		t.Helper()
		return p.evaluate(map[string]any{"tool_name": "pay", "agent_id": "pay-bot", "input": map[string]any{"amount": amount}, "approval": name})
	}

	first := asked(10)
	if n := counted(); n != 0 {
		t.Fatalf("asking counted %d calls in Redis, want 0: an ask is given back", n)
	}
	approve(first)
	if a := use(10, first); a.Decision != engine.Allow {
		t.Fatalf("the approved call: %+v, want allowed", a)
	}
	if n := counted(); n != 1 {
		t.Fatalf("the approved call counted %d times in Redis, want once", n)
	}

	// The store down: the approved call is denied USAGE_UNAVAILABLE,
	// naming the limit, and its approval stays unused.
	second := asked(20)
	approve(second)
	r.Stop()
	a := use(20, second)
	if a.Decision != engine.Deny || a.Code != decide.CodeUsageUnavailable || !strings.Contains(a.Reason, "Policy/limits/pay-per-namespace/rateLimit") {
		t.Fatalf("the approved call with the store down: %+v, want deny %s naming the limit", a, decide.CodeUsageUnavailable)
	}
	var ar v1alpha1.ApprovalRequest
	if err := admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: second}, &ar); err != nil || ar.Status.ConsumedAt != nil {
		t.Fatalf("ApprovalRequest %s after a call denied for the store: consumed at %v (%v), want unused", second, ar.Status.ConsumedAt, err)
	}
	// Restarted empty (no persistence): the approval is used once the
	// store answers, and counted there.
	r.Restart()
	waitFor(t, 10*time.Second, "the approved call allowed once the store answers", func() bool {
		a = use(20, second)
		return a.Decision == engine.Allow
	})
	if n := counted(); n != 1 {
		t.Fatalf("the approved call counted %d times in the restarted Redis, want once", n)
	}

	// An approved call not let through after all (the bundle now asks by
	// another rule) is given back, and its approval stays unused.
	third := asked(30)
	approve(third)
	renamed := askBundle(2)
	renamed.Policies[0].Rules[1].ID = "pay-asks-again"
	changedRev := publish(t, admin, renamed)
	waitFor(t, 20*time.Second, "the sidecar serving the bundle with the renamed rule", func() bool {
		return p.evaluate(map[string]any{"tool_name": "read"}).BundleRevision == changedRev
	})
	if a := use(30, third); a.Decision != engine.Deny || a.Code != "APPROVAL_INVALID" {
		t.Fatalf("the approved call once the bundle asks by another rule: %+v, want deny APPROVAL_INVALID", a)
	}
	if n := counted(); n != 1 {
		t.Fatalf("%d calls counted after an approved call was refused, want 1: it is given back", n)
	}
	publish(t, admin, b)
	waitFor(t, 20*time.Second, "the sidecar serving the first bundle again", func() bool {
		return p.evaluate(map[string]any{"tool_name": "read"}).BundleRevision == rev
	})
	// An approved call reserved, then refused because its approval could
	// not be marked used (the API server refuses the write): given back.
	lift := refuseApprovalUse(t, admin, third)
	if a := use(30, third); a.Decision != engine.Deny || a.Code != approval.CodeUnavailable || !strings.Contains(a.Reason, "could not be used") {
		t.Fatalf("the approved call whose approval cannot be marked used: %+v, want deny %s", a, approval.CodeUnavailable)
	}
	if n := counted(); n != 1 {
		t.Fatalf("%d calls counted after an approved call was refused, want 1: its reservation is given back", n)
	}
	lift()
	if a := use(30, third); a.Decision != engine.Allow {
		t.Fatalf("the third approved call: %+v, want allowed", a)
	}
	if n := counted(); n != 2 {
		t.Fatalf("%d calls counted in Redis after two approved calls, want 2", n)
	}
	// The limit (2) is reached by approved calls alone: this sidecar and
	// another of the namespace deny by it, before anyone is asked.
	other := startSidecar(t, "--bundle-file="+writeBundle(t, b), "--usage-store="+storeURL(r))
	for i, s := range []*proc{p, other} {
		if a := s.evaluate(map[string]any{"tool_name": "pay", "agent_id": "pay-bot", "input": map[string]any{"amount": 40}}); a.Decision != engine.Deny || a.rule() != "pay-per-namespace" {
			t.Fatalf("pay through sidecar %d after two approved calls: %+v, want denied by pay-per-namespace", i+1, a)
		}
	}
	if n := counted(); n != 2 {
		t.Fatalf("%d calls counted after two denied ones, want 2: a deny is given back", n)
	}
}

// publish writes b as the namespace's bundle ConfigMap, as the operator
// would, and returns its revision.
func publish(t *testing.T, admin client.Client, b engine.Bundle) string {
	t.Helper()
	doc, rev := testenv.Encode(t, b)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "toolgate-bundle",
		Labels:      map[string]string{v1alpha1.BundleLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
		Annotations: map[string]string{v1alpha1.RevisionAnnotation: rev}},
		Data: map[string]string{bundle.Key: string(doc)}}
	ctx := context.Background()
	var old corev1.ConfigMap
	err := admin.Get(ctx, client.ObjectKeyFromObject(cm), &old)
	switch {
	case apierrors.IsNotFound(err):
		err = admin.Create(ctx, cm)
	case err == nil:
		cm.ResourceVersion = old.ResourceVersion
		err = admin.Update(ctx, cm)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// refuseApprovalUse makes the API server refuse, for real, every status
// write of ApprovalRequests in the namespace (an admission policy), so that
// the sidecar cannot mark name used, until the returned func lifts it.
func refuseApprovalUse(t *testing.T, admin client.Client, name string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	const message = "approvals are frozen for this test"
	vap := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "refuse-approval-use"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"approvalrequests/status"}},
				}}}},
			MatchConditions: []admissionv1.MatchCondition{{Name: "this-namespace", Expression: fmt.Sprintf("request.namespace == %q", namespace)}},
			Validations:     []admissionv1.Validation{{Expression: "false", Message: message}},
		}}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: vap.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	for _, o := range []client.Object{vap, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// A status write of the request, changing nothing: refused once the
	// policy is in force (it reaches admission through an informer).
	statusWrite := func() error {
		var ar v1alpha1.ApprovalRequest
		if err := admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ar); err != nil {
			return err
		}
		return admin.Status().Update(ctx, &ar)
	}
	waitFor(t, 20*time.Second, "ApprovalRequest status writes refused", func() bool {
		err := statusWrite()
		return err != nil && strings.Contains(err.Error(), message)
	})
	return func() {
		for _, o := range []client.Object{binding, vap} {
			if err := admin.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 20*time.Second, "ApprovalRequest status writes allowed again", func() bool { return statusWrite() == nil })
	}
}

// answer is /v1/evaluate's answer with the approval it names.
type answer struct {
	decision
	BundleRevision string `json:"bundleRevision"`
	Approval       *struct {
		Name string `json:"name"`
	} `json:"approval"`
}

// evaluate posts req to the sidecar's /v1/evaluate.
func (p *proc) evaluate(req map[string]any) answer {
	p.t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := p.client.Post("http://sidecar/v1/evaluate", "application/json", strings.NewReader(string(body)))
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("%s: %s", resp.Status, data)
	}
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		p.t.Fatal(fmt.Errorf("%w: %s", err, data))
	}
	return a
}
