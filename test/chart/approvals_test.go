package chart

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/approve"
	"github.com/toolgate/toolgate/cli"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

// These tests install the chart's approvals admission policy and its roles
// for real, then play each party to an ApprovalRequest through the API with
// real RBAC, impersonated: the sidecar's ServiceAccount (bound to the
// injector's Role, webhook.SidecarRoleRules) asks; a namespace admin, an
// editor, a user bound to toolgate-approver and other ServiceAccounts try
// to decide, with the toolgate CLI as people would, or with hand-made
// status writes as an attacker would. The policy is cluster-wide and
// admits only its own manager, so they do not run in parallel with each
// other.

// A policy refusal carries one of these, as the policy words it.
const (
	refusedOwnName      = "must be your own user name"
	refusedAsker        = "is the ServiceAccount that asked"
	refusedSA           = "ServiceAccounts do not decide approvals"
	refusedFinal        = "a decision and its record (decidedBy, decidedAt, message) never change"
	refusedNothingToUse = "there is none to use"
	refusedExpired      = "no decision is accepted after it"
	refusedConditions   = "a sidecar writes only status.consumedAt"
	refusedManager      = "writes only status.conditions"
	refusedOwnRequest   = "may ask for approvals only in its own name"
)

// approvalsInstall is the chart installed for these tests: its policy
// active, and who plays which part in namespace ns.
type approvalsInstall struct {
	ns      string
	manager installedManager
	admin   client.Client // the test's own, unimpersonated
	sidecar podServiceAccount
}

// installApprovals applies the chart rendered with args (RBAC, the
// approvals policy and binding), binds the sidecar's Role to an agent's
// ServiceAccount in a new namespace ns, and waits until the policy refuses
// a forged decidedBy.
func installApprovals(t *testing.T, ns string, args ...string) approvalsInstall {
	t.Helper()
	return installApprovalsFrom(t, ns, render(t, args...))
}

// installApprovalsFrom is installApprovals with the objects of another
// install (config/default).
func installApprovalsFrom(t *testing.T, ns string, objs []*unstructured.Unstructured) approvalsInstall {
	t.Helper()
	m := installRBAC(t, objs)
	applyApprovalsPolicy(t, objs)
	createNamespace(t, ns)
	admin, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	in := approvalsInstall{ns: ns, manager: m, admin: admin, sidecar: podServiceAccount{ns, "billing-agent"}}
	bindSidecarRole(t, admin, ns, in.sidecar.name)
	waitForApprovalsPolicy(t, in)
	return in
}

func applyApprovalsPolicy(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		o := find(t, objs, kind, "toolgate-approvals")
		if err := apply(o, false); err != nil {
			t.Fatalf("%s %s: %v", kind, o.GetName(), err)
		}
		t.Cleanup(func() {
			if err := k8s.Delete(context.Background(), o.DeepCopy()); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting %s %s: %v", kind, o.GetName(), err)
			}
		})
	}
}

// bindSidecarRole does what injection does for an agent's Pod: the
// sidecar's Role, bound to its ServiceAccount.
func bindSidecarRole(t *testing.T, admin client.Client, ns, sa string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "toolgate-bundle-reader"},
		Rules: webhook.SidecarRoleRules("toolgate-bundle")}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "toolgate-bundle-reader-" + sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx(t), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if !canEventually(t, podServiceAccount{ns, sa}, "create", "toolgate.dev", "approvalrequests", ns, "") {
		t.Fatalf("the sidecar's Role does not let %s create ApprovalRequests", sa)
	}
}

// waitForApprovalsPolicy: the policy reaches the admission plugin through
// an informer. Until it refuses a decision signed with another's name (a
// dry run, so nothing is decided meanwhile), nothing below would prove
// anything.
func waitForApprovalsPolicy(t *testing.T, in approvalsInstall) {
	t.Helper()
	probe := in.ask(t, "policy-probe", time.Hour)
	testenv.EventuallyWithin(t, 30*time.Second, 200*time.Millisecond, "the approvals policy refuses a forged decidedBy", func() (bool, string) {
		forged := probe.DeepCopy()
		decide(forged, v1alpha1.ApprovalApproved, "someone-else", time.Now())
		err := in.admin.Status().Update(ctx(t), forged, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), refusedOwnName), fmt.Sprint(err)
	})
}

// ask creates an ApprovalRequest as the sidecar would: as its
// ServiceAccount, naming itself, expiring after ttl (negative: already
// expired).
func (in approvalsInstall) ask(t *testing.T, name string, ttl time.Duration) *v1alpha1.ApprovalRequest {
	t.Helper()
	ar := &v1alpha1.ApprovalRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.ns, Name: name},
		Spec: v1alpha1.ApprovalRequestSpec{AgentID: "billing-bot", ServiceAccount: in.sidecar.name, Tool: "pay",
			ArgumentsDigest: "sha256:" + strings.Repeat("ab", 32), Preview: `{"kwargs":{"amount":5000}}`,
			Policy: "pay-cap", Rule: "pay-over-cap", Reason: "payments over 1000 need a human approval",
			ExpiresAt: metav1.NewTime(time.Now().Add(ttl).Truncate(time.Second))},
	}
	if err := in.as(t, in.sidecar).Create(ctx(t), ar); err != nil {
		t.Fatalf("the sidecar's ServiceAccount asking: %v", err)
	}
	return ar
}

func (in approvalsInstall) as(t *testing.T, s subject) client.Client {
	t.Helper()
	return testenv.Impersonate(t, cfg, s.user(), s.groups()...)
}

func (in approvalsInstall) get(t *testing.T, name string) *v1alpha1.ApprovalRequest {
	t.Helper()
	var ar v1alpha1.ApprovalRequest
	if err := in.admin.Get(ctx(t), client.ObjectKey{Namespace: in.ns, Name: name}, &ar); err != nil {
		t.Fatal(err)
	}
	return &ar
}

// toolgate runs the CLI as s, through a kubeconfig impersonating s, as
// the binary would (cli.Execute: the exit code is the process's).
func (in approvalsInstall) toolgate(t *testing.T, s subject, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := in.run(context.Background(), t, s, &out, args...)
	return code, out.String()
}

// run is toolgate writing to out, until ctx ends.
func (in approvalsInstall) run(ctx context.Context, t *testing.T, s subject, out io.Writer, args ...string) int {
	t.Helper()
	kubeconfig := testenv.WriteKubeconfig(t, testenv.KubeconfigAs(t, cfg, s.user(), s.groups()...))
	root := cli.NewRootCommand(approve.NewApproveCommand(), approve.NewDenyCommand(), approve.NewApprovalsCommand())
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(append(args, "-n", in.ns, "--kubeconfig", kubeconfig))
	root.SetContext(ctx)
	return cli.Execute(root)
}

// lockedBuffer is written by a command running in another goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func decide(ar *v1alpha1.ApprovalRequest, d v1alpha1.ApprovalDecision, by string, at time.Time) {
	when := metav1.NewTime(at.Truncate(time.Second))
	ar.Status.Decision, ar.Status.DecidedBy, ar.Status.DecidedAt = d, by, &when
}

// bindAdmin and bindEditor give user the built-in admin or edit role in
// ns, with what the chart aggregates into it.
func bindAdmin(t *testing.T, ns string, user plainUser) {
	t.Helper()
	testenv.BindAggregated(t, k8s, ns, string(user), "admin")
	if !canEventually(t, user, "update", "toolgate.dev", "approvalrequests/status", ns, "") {
		t.Fatalf("admin does not let %s update approvalrequests/status", user)
	}
}

func requireRefusal(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want refused (%q)", what, want)
	case !strings.Contains(err.Error(), want):
		t.Errorf("%s: refused, but not saying %q: %v", what, want, err)
	}
}

// TestApprovalsAdminApprovesWithTheCLI: a namespace admin approves one
// request and denies another with toolgate; the status records who (the
// name the API server knows them by) and when; approvals list shows both.
func TestApprovalsAdminApprovesWithTheCLI(t *testing.T) {
	in := installApprovals(t, "approvals-admin")
	const admin = plainUser("ada")
	bindAdmin(t, in.ns, admin)
	in.ask(t, "pay-5000", time.Hour)
	in.ask(t, "pay-9000", time.Hour)

	if code, out := in.toolgate(t, admin, "approvals", "list"); code != 0 || !strings.Contains(out, "pay-5000") || !strings.Contains(out, "Pending") {
		t.Errorf("approvals list: exit %d\n%s", code, out)
	}
	before := time.Now().Add(-time.Second)
	code, out := in.toolgate(t, admin, "approve", "pay-5000", "-m", "checked the invoice")
	if code != 0 || !strings.Contains(out, "approved by ada") {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	ar := in.get(t, "pay-5000")
	if s := ar.Status; s.Decision != v1alpha1.ApprovalApproved || s.DecidedBy != "ada" || s.Message != "checked the invoice" ||
		s.DecidedAt == nil || s.DecidedAt.Before(&metav1.Time{Time: before.Truncate(time.Second)}) {
		t.Errorf("status after approve: %+v", s)
	}
	if code, out := in.toolgate(t, admin, "deny", "pay-9000", "-m", "over budget"); code != 0 || !strings.Contains(out, "denied by ada") {
		t.Fatalf("deny: exit %d\n%s", code, out)
	}
	if s := in.get(t, "pay-9000").Status; s.Decision != v1alpha1.ApprovalDenied || s.DecidedBy != "ada" || s.Message != "over budget" {
		t.Errorf("status after deny: %+v", s)
	}
	code, out = in.toolgate(t, admin, "approvals", "list")
	if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "Approved") || !strings.Contains(out, "Denied") {
		t.Errorf("approvals list after deciding: exit %d\n%s", code, out)
	}

	// Errors a person meets: no such request, and one already decided
	// (saying by whom), exit 1.
	if code, out := in.toolgate(t, admin, "approve", "no-such-request"); code != 1 || !strings.Contains(out, "no ApprovalRequest no-such-request in namespace approvals-admin") {
		t.Errorf("approve of nothing: exit %d\n%s", code, out)
	}
	if code, out := in.toolgate(t, admin, "deny", "pay-5000", "-m", "changed my mind"); code != 1 || !strings.Contains(out, "already Approved by ada") {
		t.Errorf("second decision through the CLI: exit %d\n%s", code, out)
	}
}

// TestApprovalsListWatches: approvals list -w prints what waits, then a
// line for each change (a new request, a decision, a deletion) as it
// happens, until interrupted.
func TestApprovalsListWatches(t *testing.T) {
	in := installApprovals(t, "approvals-watch")
	const admin = plainUser("wes")
	bindAdmin(t, in.ns, admin)
	in.ask(t, "pay-before", time.Hour)
	watchCtx, stop := context.WithCancel(context.Background())
	var out lockedBuffer
	done := make(chan int)
	go func() { done <- in.run(watchCtx, t, admin, &out, "approvals", "list", "-w") }()
	see := func(what string, match func(line string) bool) {
		t.Helper()
		testenv.EventuallyWithin(t, 30*time.Second, 100*time.Millisecond, what, func() (bool, string) {
			for _, line := range strings.Split(out.String(), "\n") {
				if match(line) {
					return true, ""
				}
			}
			return false, out.String()
		})
	}
	see("the request there before", func(l string) bool { return strings.HasPrefix(l, "pay-before ") && strings.Contains(l, "Pending") })
	in.ask(t, "pay-during", time.Hour)
	see("a new request", func(l string) bool { return strings.HasPrefix(l, "pay-during ") && strings.Contains(l, "Pending") })
	if code, msg := in.toolgate(t, admin, "approve", "pay-during"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, msg)
	}
	see("its approval", func(l string) bool { return strings.HasPrefix(l, "pay-during ") && strings.Contains(l, "Approved") })
	if err := in.admin.Delete(ctx(t), in.get(t, "pay-before")); err != nil {
		t.Fatal(err)
	}
	see("a deletion", func(l string) bool { return strings.HasPrefix(l, "pay-before ") && strings.HasSuffix(l, "(deleted)") })
	stop()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("approvals list -w interrupted: exit %d\n%s", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Error("approvals list -w did not end with its context")
	}
}

// TestAttackAgentServiceAccountCannotApprove: the agent's ServiceAccount
// (what its sidecar runs as, and the agent too where its token is
// mounted) holds the status write for consumedAt. With it, it tries to
// approve its own call through the CLI and by hand, signing with its own
// name or a person's; another agent's ServiceAccount of the namespace
// tries too. All refused, saying why.
func TestAttackAgentServiceAccountCannotApprove(t *testing.T) {
	in := installApprovals(t, "approvals-agent")
	in.ask(t, "pay-own", time.Hour)

	code, out := in.toolgate(t, in.sidecar, "approve", "pay-own")
	if code != 1 || !strings.Contains(out, "the API server refused "+in.sidecar.user()) || !strings.Contains(out, refusedAsker) {
		t.Errorf("the agent's ServiceAccount approving with the CLI: exit %d\n%s", code, out)
	}
	agent := in.as(t, in.sidecar)
	self := in.get(t, "pay-own")
	decide(self, v1alpha1.ApprovalApproved, in.sidecar.user(), time.Now())
	requireRefusal(t, "the agent approving in its own name", agent.Status().Update(ctx(t), self), refusedAsker)
	person := in.get(t, "pay-own")
	decide(person, v1alpha1.ApprovalApproved, "ada", time.Now())
	requireRefusal(t, "the agent approving in a person's name", agent.Status().Update(ctx(t), person), refusedOwnName)

	// Another agent of the namespace, with the same Role: not the one
	// that asked, still a ServiceAccount.
	other := podServiceAccount{in.ns, "other-agent"}
	bindSidecarRole(t, in.admin, in.ns, other.name)
	code, out = in.toolgate(t, other, "approve", "pay-own")
	if code != 1 || !strings.Contains(out, refusedSA) {
		t.Errorf("another agent's ServiceAccount approving: exit %d\n%s", code, out)
	}
	// Nor may it ask in the first agent's name, to approve that later.
	forged := &v1alpha1.ApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: in.ns, Name: "in-anothers-name"}, Spec: self.Spec}
	requireRefusal(t, "asking in another ServiceAccount's name", in.as(t, other).Create(ctx(t), forged), refusedOwnRequest)

	if s := in.get(t, "pay-own").Status; s.Decision != "" {
		t.Errorf("after the attacks, the request is %s by %s", s.Decision, s.DecidedBy)
	}
}

// TestAttackEditUserCannotApprove: an editor of the namespace (who may run
// agents there) reads approvals but cannot decide them: RBAC refuses the
// status write before the policy is asked.
func TestAttackEditUserCannotApprove(t *testing.T) {
	in := installApprovals(t, "approvals-edit")
	const editor = plainUser("eddie")
	testenv.BindAggregated(t, k8s, in.ns, string(editor), "edit")
	if !canEventually(t, editor, "list", "toolgate.dev", "approvalrequests", in.ns, "") {
		t.Fatal("edit does not let the editor list ApprovalRequests")
	}
	in.ask(t, "pay-edit", time.Hour)
	if code, out := in.toolgate(t, editor, "approvals", "list"); code != 0 || !strings.Contains(out, "pay-edit") {
		t.Errorf("the editor listing: exit %d\n%s", code, out)
	}
	code, out := in.toolgate(t, editor, "approve", "pay-edit")
	if code != 1 || !strings.Contains(out, `cannot update resource "approvalrequests/status"`) {
		t.Errorf("the editor approving: exit %d\n%s", code, out)
	}
	ar := in.get(t, "pay-edit")
	decide(ar, v1alpha1.ApprovalApproved, string(editor), time.Now())
	if err := in.as(t, editor).Status().Update(ctx(t), ar); !apierrors.IsForbidden(err) {
		t.Errorf("the editor's status write: %v, want Forbidden by RBAC", err)
	}
	if can(t, editor, "patch", "toolgate.dev", "approvalrequests/status", in.ns, "pay-edit") {
		t.Error("edit lets the editor patch approvalrequests/status")
	}
}

// TestAttackDecisionIsFinal: once decided, neither another decision nor a
// rewrite of who decided, when or why is accepted, from the CLI or by hand,
// even by a namespace admin.
func TestAttackDecisionIsFinal(t *testing.T) {
	in := installApprovals(t, "approvals-final")
	const first, second = plainUser("bea"), plainUser("mallory")
	bindAdmin(t, in.ns, first)
	bindAdmin(t, in.ns, second)
	in.ask(t, "pay-final", time.Hour)
	if code, out := in.toolgate(t, first, "approve", "pay-final"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	if code, out := in.toolgate(t, second, "deny", "pay-final", "-m", "no"); code != 1 || !strings.Contains(out, "already Approved by bea") {
		t.Errorf("a second decision through the CLI: exit %d\n%s", code, out)
	}
	attacker := in.as(t, second)
	flip := in.get(t, "pay-final")
	decide(flip, v1alpha1.ApprovalDenied, string(second), time.Now())
	requireRefusal(t, "changing the decision", attacker.Status().Update(ctx(t), flip), "decision cannot change once made")
	claim := in.get(t, "pay-final")
	claim.Status.DecidedBy = string(second)
	requireRefusal(t, "re-signing the decision", attacker.Status().Update(ctx(t), claim), refusedFinal)
	reword := in.get(t, "pay-final")
	reword.Status.Message = "approved because mallory said so"
	requireRefusal(t, "rewording the decision", attacker.Status().Update(ctx(t), reword), refusedFinal)
	// Before a decision, its record cannot be written alone either.
	in.ask(t, "pay-unsigned", time.Hour)
	pre := in.get(t, "pay-unsigned")
	pre.Status.DecidedBy = string(second)
	requireRefusal(t, "decidedBy without a decision", attacker.Status().Update(ctx(t), pre), "written with the decision")
}

// TestAttackDecidedByAnotherUser: an admin who may approve signs the
// decision with someone else's name: refused, naming both. In their own
// name, with kubectl's merge patch, it is accepted.
func TestAttackDecidedByAnotherUser(t *testing.T) {
	in := installApprovals(t, "approvals-forged")
	const mallory = plainUser("mal")
	bindAdmin(t, in.ns, mallory)
	in.ask(t, "pay-forged", time.Hour)
	ar := in.get(t, "pay-forged")
	decide(ar, v1alpha1.ApprovalApproved, "the-cfo", time.Now())
	err := in.as(t, mallory).Status().Update(ctx(t), ar)
	requireRefusal(t, "signing as the-cfo", err, refusedOwnName+", mal, not the-cfo")
	// The same admin in their own name, as kubectl patch would write it
	// (no decidedAt: the API server's clock says when): accepted.
	patch := []byte(`{"status":{"decision":"Approved","decidedBy":"mal","message":"ok"}}`)
	if err := in.as(t, mallory).Status().Patch(ctx(t), in.get(t, "pay-forged"), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Errorf("approving with a merge patch of the status, in one's own name: %v", err)
	}
}

// TestAttackExpiredRequestCannotBeDecided: past expiresAt the CLI says so
// before writing. By hand, a decision written after expiresAt is refused by
// the API server's clock (its stamp in managedFields), whatever decidedAt
// says, with managedFields rewritten to earlier times or stripped; one
// whose decidedAt is late is refused too; and once the operator has marked
// the request Expired, any decision is.
func TestAttackExpiredRequestCannotBeDecided(t *testing.T) {
	in := installApprovals(t, "approvals-expired")
	const admin = plainUser("cid")
	bindAdmin(t, in.ns, admin)
	asAdmin := in.as(t, admin)
	in.ask(t, "pay-late", 2*time.Second)
	in.ask(t, "pay-marked", time.Hour)
	in.ask(t, "pay-stated-late", time.Hour)
	expires := in.get(t, "pay-late").Spec.ExpiresAt.Time
	time.Sleep(time.Until(expires.Add(1100 * time.Millisecond)))
	if code, out := in.toolgate(t, admin, "approve", "pay-late"); code != 1 || !strings.Contains(out, "expired") {
		t.Errorf("approving an expired request: exit %d\n%s", code, out)
	}
	backdated := in.get(t, "pay-late")
	decide(backdated, v1alpha1.ApprovalApproved, string(admin), expires.Add(-time.Second))
	requireRefusal(t, "a backdated decision after expiresAt", asAdmin.Status().Update(ctx(t), backdated), refusedExpired)
	undated := in.get(t, "pay-late")
	decide(undated, v1alpha1.ApprovalApproved, string(admin), time.Now())
	undated.Status.DecidedAt = nil
	requireRefusal(t, "an undated decision after expiresAt", asAdmin.Status().Update(ctx(t), undated), refusedExpired)
	rewritten := backdated.DeepCopy()
	rewritten.ResourceVersion = in.get(t, "pay-late").ResourceVersion
	for i := range rewritten.ManagedFields {
		rewritten.ManagedFields[i].Time = &metav1.Time{Time: expires.Add(-time.Minute)}
	}
	requireRefusal(t, "a decision after expiresAt with managedFields rewritten to earlier times", asAdmin.Status().Update(ctx(t), rewritten), refusedExpired)
	stripped := backdated.DeepCopy()
	stripped.ResourceVersion = rewritten.ResourceVersion
	stripped.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	// Stripped, the API server stamps this write all the same (the rule
	// that refuses a decision without managedFields is the fallback).
	requireRefusal(t, "a decision after expiresAt with managedFields stripped", asAdmin.Status().Update(ctx(t), stripped), refusedExpired)

	late := in.get(t, "pay-stated-late")
	decide(late, v1alpha1.ApprovalApproved, string(admin), late.Spec.ExpiresAt.Add(time.Minute))
	requireRefusal(t, "a decision whose decidedAt is after expiresAt", asAdmin.Status().Update(ctx(t), late), refusedExpired)

	marked := in.get(t, "pay-marked")
	meta.SetStatusCondition(&marked.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonApprovalExpired, Message: "expired undecided"})
	if err := in.as(t, in.manager).Status().Update(ctx(t), marked); err != nil {
		t.Fatalf("the manager marking it Expired: %v", err)
	}
	marked = in.get(t, "pay-marked")
	decide(marked, v1alpha1.ApprovalApproved, string(admin), time.Now())
	requireRefusal(t, "a decision on a request the operator marked Expired", asAdmin.Status().Update(ctx(t), marked), refusedExpired)
	for _, name := range []string{"pay-late", "pay-marked", "pay-stated-late"} {
		if s := in.get(t, name).Status; s.Decision != "" {
			t.Errorf("%s is %s after the attempts", name, s.Decision)
		}
	}
}

// TestSidecarConsumesOnlyAnApproval: the sidecar's ServiceAccount records
// consumedAt on an approved request, once; on a pending or denied one it is
// refused (there is nothing to use), and it may not touch the conditions.
func TestSidecarConsumesOnlyAnApproval(t *testing.T) {
	in := installApprovals(t, "approvals-consume")
	const admin = plainUser("dot")
	bindAdmin(t, in.ns, admin)
	sidecar := in.as(t, in.sidecar)
	consume := func(name string, at time.Time) error {
		ar := in.get(t, name)
		when := metav1.NewTime(at.Truncate(time.Second))
		ar.Status.ConsumedAt = &when
		return sidecar.Status().Update(ctx(t), ar)
	}

	in.ask(t, "pay-pending", time.Hour)
	requireRefusal(t, "consuming a pending request", consume("pay-pending", time.Now()), "is pending: "+"status.consumedAt records the use of an approval, and "+refusedNothingToUse)
	in.ask(t, "pay-denied", time.Hour)
	if code, out := in.toolgate(t, admin, "deny", "pay-denied", "-m", "no"); code != 0 {
		t.Fatalf("deny: exit %d\n%s", code, out)
	}
	requireRefusal(t, "consuming a denied request", consume("pay-denied", time.Now()), "is Denied")

	in.ask(t, "pay-approved", time.Hour)
	if code, out := in.toolgate(t, admin, "approve", "pay-approved"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	if err := consume("pay-approved", time.Now()); err != nil {
		t.Fatalf("the sidecar consuming an approval: %v", err)
	}
	if in.get(t, "pay-approved").Status.ConsumedAt == nil {
		t.Fatal("consumedAt not recorded")
	}
	requireRefusal(t, "consuming it twice", consume("pay-approved", time.Now().Add(time.Minute)), "consumedAt cannot change once set")

	cond := in.get(t, "pay-pending")
	meta.SetStatusCondition(&cond.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonApproved, Message: "trust me"})
	requireRefusal(t, "the sidecar writing conditions", sidecar.Status().Update(ctx(t), cond), refusedConditions)
}

// TestManagerWritesOnlyConditions: the operator's ServiceAccount keeps the
// conditions, and can neither decide nor consume.
func TestManagerWritesOnlyConditions(t *testing.T) {
	in := installApprovals(t, "approvals-manager")
	manager := in.as(t, in.manager)
	in.ask(t, "pay-manager", time.Hour)
	ar := in.get(t, "pay-manager")
	meta.SetStatusCondition(&ar.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonApprovalPending, Message: "waiting for a person"})
	if err := manager.Status().Update(ctx(t), ar); err != nil {
		t.Fatalf("the manager writing conditions: %v", err)
	}
	ar = in.get(t, "pay-manager")
	decide(ar, v1alpha1.ApprovalApproved, in.manager.user(), time.Now())
	requireRefusal(t, "the manager approving", manager.Status().Update(ctx(t), ar), refusedSA)
}

// TestApproverRoleLetsABoundUserApprove: a user with no role in the
// namespace cannot approve; bound to toolgate-approver there, they can,
// and that role lets them do nothing else to the request.
func TestApproverRoleLetsABoundUserApprove(t *testing.T) {
	in := installApprovals(t, "approvals-approver")
	const oncall = plainUser("oncall")
	in.ask(t, "pay-oncall", time.Hour)
	if code, out := in.toolgate(t, oncall, "approve", "pay-oncall"); code != 1 || !strings.Contains(out, "forbidden") {
		t.Errorf("approving without a role: exit %d\n%s", code, out)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: in.ns, Name: "oncall-approves"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "toolgate-approver"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: string(oncall)}}}
	if err := in.admin.Create(ctx(t), rb); err != nil {
		t.Fatal(err)
	}
	if !canEventually(t, oncall, "update", "toolgate.dev", "approvalrequests/status", in.ns, "pay-oncall") {
		t.Fatal("toolgate-approver does not let its user update approvalrequests/status")
	}
	if code, out := in.toolgate(t, oncall, "approve", "pay-oncall", "-m", "ok"); code != 0 || !strings.Contains(out, "approved by oncall") {
		t.Fatalf("approving with toolgate-approver: exit %d\n%s", code, out)
	}
	for _, a := range []access{
		{"update", "toolgate.dev", "approvalrequests", in.ns, "pay-oncall"},
		{"delete", "toolgate.dev", "approvalrequests", in.ns, "pay-oncall"},
		{"create", "toolgate.dev", "approvalrequests", in.ns, ""},
		{"update", "toolgate.dev", "approvalrequests/status", "elsewhere", "pay-oncall"},
		{"update", "toolgate.dev", "policies", in.ns, "any"},
	} {
		if can(t, oncall, a.verb, a.group, a.resource, a.namespace, a.name) {
			t.Errorf("toolgate-approver lets its user %s %s %q in %q", a.verb, a.resource, a.name, a.namespace)
		}
	}
}

// TestApproverServiceAccountsValue: a ServiceAccount the chart value
// approvals.approverServiceAccounts lists (an approval bot) decides; the
// one that asked never does, listed or not.
func TestApproverServiceAccountsValue(t *testing.T) {
	bot := podServiceAccount{"approvals-bot", "approval-bot"}
	asker := podServiceAccount{"approvals-bot", "billing-agent"}
	in := installApprovals(t, bot.namespace, "--set", "approvals.approverServiceAccounts={"+bot.user()+","+asker.user()+"}")
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: in.ns, Name: "bot-approves"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "toolgate-approver"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: bot.name, Namespace: bot.namespace}}}
	if err := in.admin.Create(ctx(t), rb); err != nil {
		t.Fatal(err)
	}
	if !canEventually(t, bot, "update", "toolgate.dev", "approvalrequests/status", in.ns, "") {
		t.Fatal("the bot's binding never applied")
	}
	in.ask(t, "pay-bot", time.Hour)
	// The policy of the test before, with no ServiceAccount listed, may
	// still be the one in force: wait until a dry run says the bot may.
	testenv.EventuallyWithin(t, 30*time.Second, 200*time.Millisecond, "the listed bot admitted", func() (bool, string) {
		ar := in.get(t, "pay-bot")
		decide(ar, v1alpha1.ApprovalApproved, bot.user(), time.Now())
		err := in.as(t, bot).Status().Update(ctx(t), ar, client.DryRunAll)
		return err == nil, fmt.Sprint(err)
	})
	if code, out := in.toolgate(t, asker, "approve", "pay-bot"); code != 1 || !strings.Contains(out, refusedAsker) {
		t.Errorf("the listed asker approving its own: exit %d\n%s", code, out)
	}
	if code, out := in.toolgate(t, bot, "approve", "pay-bot"); code != 0 || !strings.Contains(out, "approved by "+bot.user()) {
		t.Errorf("the listed bot approving: exit %d\n%s", code, out)
	}
}

// TestKustomizeGuardsApprovals: config/default, installed the same way,
// lets a namespace admin approve and refuses the agent's ServiceAccount and
// an editor.
func TestKustomizeGuardsApprovals(t *testing.T) {
	in := installApprovalsFrom(t, "approvals-kustomize", kustomize(t, "config/default"))
	const admin, editor = plainUser("kay"), plainUser("ken")
	bindAdmin(t, in.ns, admin)
	testenv.BindAggregated(t, k8s, in.ns, string(editor), "edit")
	in.ask(t, "pay-kustomize", time.Hour)
	if code, out := in.toolgate(t, in.sidecar, "approve", "pay-kustomize"); code != 1 || !strings.Contains(out, refusedAsker) {
		t.Errorf("the agent's ServiceAccount approving: exit %d\n%s", code, out)
	}
	if code, out := in.toolgate(t, editor, "approve", "pay-kustomize"); code != 1 || !strings.Contains(out, "forbidden") {
		t.Errorf("an editor approving: exit %d\n%s", code, out)
	}
	if code, out := in.toolgate(t, admin, "approve", "pay-kustomize"); code != 0 || !strings.Contains(out, "approved by kay") {
		t.Errorf("the admin approving: exit %d\n%s", code, out)
	}
}

// TestApprovalsPolicyShipsAlike: config/default carries the chart's policy
// (defaults) and approver role, the value toggles the policy, and a bad
// approverServiceAccounts entry fails the install.
func TestApprovalsPolicyShipsAlike(t *testing.T) {
	t.Parallel()
	chart, kust := render(t), kustomize(t, "config/default")
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		h, k := find(t, chart, kind, "toolgate-approvals"), find(t, kust, kind, "toolgate-approvals")
		if !reflect.DeepEqual(h.Object["spec"], k.Object["spec"]) {
			t.Errorf("%s spec differs:\nchart     %v\nkustomize %v", kind, h.Object["spec"], k.Object["spec"])
		}
	}
	h := typed[rbacv1.ClusterRole](t, find(t, chart, "ClusterRole", "toolgate-approver"))
	k := typed[rbacv1.ClusterRole](t, find(t, kust, "ClusterRole", "toolgate-approver"))
	if !reflect.DeepEqual(h.Rules, k.Rules) {
		t.Errorf("toolgate-approver rules: chart %+v, kustomize %+v", h.Rules, k.Rules)
	}
	off := render(t, "--set", "approvals.admissionPolicy.enabled=false")
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if on, off := len(all(chart, kind)), len(all(off, kind)); off != on-1 {
			t.Errorf("approvals.admissionPolicy.enabled=false: %d of kind %s, want one fewer than %d", off, kind, on)
		}
	}
	if _, err := helmTemplate("--set", "approvals.approverServiceAccounts={approval-bot}"); err == nil || !strings.Contains(err.Error(), "approverServiceAccounts") {
		t.Errorf("a bare name in approverServiceAccounts: %v, want the schema to refuse it", err)
	}
}
