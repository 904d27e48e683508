package approval_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The sidecar's decision core holds the Store as its Approvals.
var _ decide.Approvals = (*approval.Store)(nil)

// One real control plane for the package's tests.
var (
	adminCfg *rest.Config
	admin    client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, func(s testenv.Suite) { adminCfg, admin = s.Config, s.Client }))
}

// clock is a Now tests move by hand.
type clock struct{ now atomic.Int64 }

func newClock() *clock { c := &clock{}; c.now.Store(time.Now().UnixNano()); return c }

func (c *clock) Now() time.Time              { return time.Unix(0, c.now.Load()) }
func (c *clock) Add(d time.Duration)         { c.now.Add(int64(d)) }
func (c *clock) opts() approval.StoreOptions { return approval.StoreOptions{Now: c.Now} }

const (
	sidecarSA = "agent"
	approver  = "alice"
)

// sidecarRules are what the issue grants a sidecar on ApprovalRequests in
// its namespace, and nothing more: the Store must work with them.
var sidecarRules = []rbacv1.PolicyRule{
	{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"approvalrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
	{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"approvalrequests/status"}, Verbs: []string{"update"}},
}

// approverRules let a person read requests and write their decision.
var approverRules = []rbacv1.PolicyRule{
	{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"approvalrequests"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"approvalrequests/status"}, Verbs: []string{"update"}},
}

// cluster is one test's namespace: the sidecar's ServiceAccount with the
// sidecar's RBAC there, and a person allowed to decide.
type cluster struct {
	t        *testing.T
	ns       string
	sidecar  *rest.Config
	person   client.Client
	saUser   string
	saGroups []string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	ns := testenv.Namespace(t, admin, "approval-")
	c := &cluster{t: t, ns: ns, saUser: "system:serviceaccount:" + ns + ":" + sidecarSA,
		saGroups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	grant(t, ns, "sidecar", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sidecarSA, Namespace: ns}, sidecarRules)
	grant(t, ns, "approver", rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: approver}, approverRules)
	if !testenv.CanEventually(t, admin, c.saUser, c.saGroups, "watch", v1alpha1.GroupVersion.Group, "approvalrequests", ns, "") ||
		!testenv.CanEventually(t, admin, approver, nil, "update", v1alpha1.GroupVersion.Group, "approvalrequests/status", ns, "") {
		t.Fatal("the test's RBAC did not apply")
	}
	c.sidecar = rest.CopyConfig(adminCfg)
	c.sidecar.Impersonate = rest.ImpersonationConfig{UserName: c.saUser, Groups: c.saGroups}
	c.person = testenv.Impersonate(t, adminCfg, approver)
	return c
}

func grant(t *testing.T, ns, name string, who rbacv1.Subject, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{who}}
	if err := admin.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
}

// store starts a Store as the sidecar's ServiceAccount, synced, stopped
// with the test.
func (c *cluster) store(opts approval.StoreOptions) *approval.Store {
	c.t.Helper()
	s, err := approval.NewStore(c.sidecar, c.ns, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	c.t.Cleanup(func() { cancel(); <-done })
	testenv.Eventually(c.t, "the store's first list", func() (bool, string) { return s.HasSynced(), "not synced" })
	return s
}

// decide writes a person's decision through the status subresource, as
// toolgate approve or kubectl would.
func (c *cluster) decide(name string, d v1alpha1.ApprovalDecision, msg string, at time.Time) {
	c.t.Helper()
	ctx := context.Background()
	var ar v1alpha1.ApprovalRequest
	if err := c.person.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, &ar); err != nil {
		c.t.Fatal(err)
	}
	ar.Status.Decision, ar.Status.DecidedBy, ar.Status.Message = d, approver, msg
	ar.Status.DecidedAt = &metav1.Time{Time: at}
	if err := c.person.Status().Update(ctx, &ar); err != nil {
		c.t.Fatalf("%s %s: %v", d, name, err)
	}
}

// requests lists the namespace's ApprovalRequests on the API server.
func (c *cluster) requests() []v1alpha1.ApprovalRequest {
	c.t.Helper()
	var l v1alpha1.ApprovalRequestList
	if err := admin.List(context.Background(), &l, client.InNamespace(c.ns)); err != nil {
		c.t.Fatal(err)
	}
	return l.Items
}

func (c *cluster) get(name string) v1alpha1.ApprovalRequest {
	c.t.Helper()
	var ar v1alpha1.ApprovalRequest
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: name}, &ar); err != nil {
		c.t.Fatal(err)
	}
	return ar
}

// payCall is a call of tool pay by shop-agent with amount in its kwargs.
func payCall(amount float64) *approval.Call {
	return &approval.Call{
		AgentID: "shop-agent", Tool: "pay", Server: "payments", Action: "",
		Digest:         approval.Digest(map[string]any{"kwargs": map[string]any{"amount": amount}}),
		ServiceAccount: "agent", Preview: `{"kwargs":{"amount":` + strconv.FormatFloat(amount, 'f', -1, 64) + `}}`,
		Policy: "pay-cap", Rule: "pay-over-cap", PolicyVersion: 3, Revision: "rev-1",
		Reason: "payments over 1000 need a human approval", Timeout: 5 * time.Minute,
	}
}

func waitState(t *testing.T, s *approval.Store, name string, call *approval.Call, want approval.State) approval.Status {
	t.Helper()
	var st approval.Status
	testenv.Eventually(t, "request "+name+" "+want.String(), func() (bool, string) {
		st = s.Status(name, call)
		return st.State == want, st.State.String()
	})
	return st
}

func TestAskCreatesTheRequestAndReusesItWhilePending(t *testing.T) {
	c := newCluster(t)
	clk := newClock()
	s := c.store(clk.opts())
	call := payCall(5000)
	call.Preview = strings.Repeat("é", 3000) // 6000 bytes: cut to 4096 at a character boundary
	ctx := context.Background()

	tk, err := s.Ask(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Namespace != c.ns || !strings.HasPrefix(tk.Name, "pay-") {
		t.Errorf("ticket %+v: want a request named pay-… in %s", tk, c.ns)
	}
	wantExpiry := clk.Now().Add(5 * time.Minute).Truncate(time.Second)
	if !tk.ExpiresAt.Equal(wantExpiry) {
		t.Errorf("expires at %s, want %s", tk.ExpiresAt, wantExpiry)
	}
	// Seen at once, before the watch may have delivered it.
	if st := s.Status(tk.Name, call); st.State != approval.Pending {
		t.Errorf("right after Ask: %s, want Pending", st.State)
	}

	ar := c.get(tk.Name)
	want := v1alpha1.ApprovalRequestSpec{AgentID: "shop-agent", ServiceAccount: "agent", Tool: "pay", Server: "payments",
		ArgumentsDigest: call.Digest, Policy: "pay-cap", Rule: "pay-over-cap", PolicyVersion: 3, BundleRevision: "rev-1",
		Reason: call.Reason, ExpiresAt: metav1.NewTime(wantExpiry), Preview: strings.Repeat("é", 2048)}
	if got := ar.Spec; got.AgentID != want.AgentID || got.ServiceAccount != want.ServiceAccount || got.Tool != want.Tool ||
		got.Server != want.Server || got.ArgumentsDigest != want.ArgumentsDigest || got.Policy != want.Policy ||
		got.Rule != want.Rule || got.PolicyVersion != want.PolicyVersion || got.BundleRevision != want.BundleRevision ||
		got.Reason != want.Reason || !got.ExpiresAt.Equal(&want.ExpiresAt) || got.Preview != want.Preview {
		t.Errorf("spec\n got %+v\nwant %+v", got, want)
	}
	if len(ar.Spec.Preview) > v1alpha1.MaxApprovalPreviewLength || !utf8.ValidString(ar.Spec.Preview) {
		t.Errorf("preview of %d bytes, valid UTF-8 %v", len(ar.Spec.Preview), utf8.ValidString(ar.Spec.Preview))
	}
	if ar.Labels[v1alpha1.LabelApprovalKey] != call.Key() || ar.Labels[v1alpha1.LabelApprovalAgent] != approval.AgentKey("shop-agent") {
		t.Errorf("labels %v", ar.Labels)
	}
	if ar.Status.Decision != "" || ar.Status.ConsumedAt != nil {
		t.Errorf("a new request has status %+v", ar.Status)
	}

	// The identical call, again and from 10 goroutines at once: one object.
	same := payCall(5000)
	same.Preview = call.Preview
	again, err := s.Ask(ctx, same)
	if err != nil || again.Name != tk.Name {
		t.Fatalf("identical call: %+v, %v; want %s", again, err, tk.Name)
	}
	other := payCall(7000)
	var wg sync.WaitGroup
	names := make([]string, 10)
	for i := range names {
		wg.Go(func() {
			tk, err := s.Ask(ctx, other)
			if err != nil {
				t.Error(err)
			}
			names[i] = tk.Name
		})
	}
	wg.Wait()
	for _, n := range names {
		if n != names[0] || n == tk.Name {
			t.Fatalf("concurrent identical Asks got %v; want one request, not %s", names, tk.Name)
		}
	}
	if n := len(c.requests()); n != 2 {
		t.Errorf("%d ApprovalRequests, want 2 (one per distinct call)", n)
	}
}

func TestAskChangedArgumentAsksAgain(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{})
	ctx := context.Background()
	a, err := s.Ask(ctx, payCall(5000))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Ask(ctx, payCall(5001))
	if err != nil {
		t.Fatal(err)
	}
	if a.Name == b.Name {
		t.Fatalf("a changed amount reused %s", a.Name)
	}
	// The same arguments asked by a rule whose description changed since:
	// the pending request shows the old reason, so not this call's.
	edited := payCall(5000)
	edited.Reason = "payments over 500 need a human approval"
	e, err := s.Ask(ctx, edited)
	if err != nil || e.Name == a.Name {
		t.Fatalf("another reason: %+v, %v; want a request of its own", e, err)
	}
	if n := len(c.requests()); n != 3 {
		t.Errorf("%d ApprovalRequests, want 3", n)
	}
	// Each request is for its own call only.
	if st := s.Status(a.Name, payCall(5001)); st.State != approval.Mismatch {
		t.Errorf("request for 5000 asked about 5001: %s, want Mismatch", st.State)
	}
}

func TestAskQueueFull(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{MaxPendingPerAgent: 3})
	ctx := context.Background()
	var first approval.Ticket
	for i := range 3 {
		tk, err := s.Ask(ctx, payCall(float64(2000+i)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = tk
		}
	}
	_, err := s.Ask(ctx, payCall(9999))
	if !errors.Is(err, approval.ErrQueueFull) {
		t.Fatalf("a fourth pending request: %v, want ErrQueueFull", err)
	}
	if !strings.Contains(err.Error(), "shop-agent") || !strings.Contains(err.Error(), c.ns) {
		t.Errorf("error %q does not name the agent and namespace", err)
	}
	// An identical call still gets its pending request; another agent has
	// its own queue.
	if tk, err := s.Ask(ctx, payCall(2000)); err != nil || tk.Name != first.Name {
		t.Errorf("identical call at the cap: %+v, %v", tk, err)
	}
	otherAgent := payCall(9999)
	otherAgent.AgentID = "other-agent"
	if _, err := s.Ask(ctx, otherAgent); err != nil {
		t.Errorf("another agent: %v", err)
	}
	// A decided request no longer counts.
	c.decide(first.Name, v1alpha1.ApprovalDenied, "no", time.Now())
	waitState(t, s, first.Name, payCall(2000), approval.Denied)
	if _, err := s.Ask(ctx, payCall(9999)); err != nil {
		t.Errorf("after a denial freed a place: %v", err)
	}
	if n := len(c.requests()); n != 5 {
		t.Errorf("%d ApprovalRequests, want 5", n)
	}
}

func TestApprovedIsConsumedOnce(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{})
	ctx := context.Background()
	call := payCall(5000)
	tk, err := s.Ask(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Status(tk.Name, call); st.State != approval.Pending {
		t.Fatalf("%s, want Pending", st.State)
	}
	if err := s.Consume(ctx, tk.Name); err == nil || errors.Is(err, approval.ErrConsumed) {
		t.Errorf("consuming a pending request: %v, want an error other than ErrConsumed", err)
	}

	c.decide(tk.Name, v1alpha1.ApprovalApproved, "ok once", time.Now())
	st := waitState(t, s, tk.Name, call, approval.Approved)
	if st.DecidedBy != approver || st.Ticket != tk {
		t.Errorf("approved status %+v, want decided by %s, ticket %+v", st, approver, tk)
	}
	if err := s.Consume(ctx, tk.Name); err != nil {
		t.Fatalf("consume: %v", err)
	}
	// This process sees its own write at once, the API server has it.
	if st := s.Status(tk.Name, call); st.State != approval.Consumed {
		t.Errorf("after Consume: %s, want Consumed", st.State)
	}
	if ar := c.get(tk.Name); ar.Status.ConsumedAt == nil || ar.Status.Decision != v1alpha1.ApprovalApproved {
		t.Errorf("stored status %+v: want consumedAt set, decision kept", ar.Status)
	}
	err = s.Consume(ctx, tk.Name)
	if !errors.Is(err, approval.ErrConsumed) {
		t.Errorf("second Consume: %v, want ErrConsumed", err)
	}
	if err != nil && !strings.Contains(err.Error(), c.ns+"/"+tk.Name) {
		t.Errorf("error %q does not name %s/%s", err, c.ns, tk.Name)
	}
	// A consumed request is not pending: the identical call asks again.
	if again, err := s.Ask(ctx, call); err != nil || again.Name == tk.Name {
		t.Errorf("identical call after use: %+v, %v; want a new request", again, err)
	}
}

func TestConsumeRaceBetweenReplicas(t *testing.T) {
	c := newCluster(t)
	a, b := c.store(approval.StoreOptions{}), c.store(approval.StoreOptions{})
	ctx := context.Background()
	for round := range 20 {
		call := payCall(float64(10000 + round))
		tk, err := a.Ask(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		c.decide(tk.Name, v1alpha1.ApprovalApproved, "", time.Now())
		waitState(t, a, tk.Name, call, approval.Approved)
		waitState(t, b, tk.Name, call, approval.Approved)
		var errA, errB error
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-start; errA = a.Consume(ctx, tk.Name) })
		wg.Go(func() { <-start; errB = b.Consume(ctx, tk.Name) })
		close(start)
		wg.Wait()
		won := 0
		for _, err := range []error{errA, errB} {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, approval.ErrConsumed):
				t.Errorf("round %d: loser's error %v, want ErrConsumed", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d replicas consumed %s (errors %v, %v), want exactly 1", round, won, tk.Name, errA, errB)
		}
	}
}

func TestDeniedCarriesTheMessage(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{})
	ctx := context.Background()
	call := payCall(5000)
	tk, err := s.Ask(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	c.decide(tk.Name, v1alpha1.ApprovalDenied, "not this vendor", time.Now())
	st := waitState(t, s, tk.Name, call, approval.Denied)
	if st.DecidedBy != approver || st.Message != "not this vendor" {
		t.Errorf("denied status %+v: want decided by %s with the message", st, approver)
	}
	if err := s.Consume(ctx, tk.Name); err == nil || errors.Is(err, approval.ErrConsumed) {
		t.Errorf("consuming a denied request: %v, want an error other than ErrConsumed", err)
	}
	if ar := c.get(tk.Name); ar.Status.ConsumedAt != nil {
		t.Error("a denied request was marked used")
	}
}

func TestExpired(t *testing.T) {
	c := newCluster(t)
	clk := newClock()
	s := c.store(clk.opts())
	ctx := context.Background()
	call := payCall(5000)
	call.Timeout = time.Minute
	tk, err := s.Ask(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(59 * time.Second)
	if st := s.Status(tk.Name, call); st.State != approval.Pending {
		t.Errorf("before expiresAt: %s, want Pending", st.State)
	}
	clk.Add(2 * time.Second)
	if st := s.Status(tk.Name, call); st.State != approval.Expired {
		t.Errorf("after expiresAt: %s, want Expired", st.State)
	}
	// An expired request is not pending: the identical call asks anew.
	fresh, err := s.Ask(ctx, call)
	if err != nil || fresh.Name == tk.Name {
		t.Fatalf("identical call after expiry: %+v, %v; want a new request", fresh, err)
	}
	// An approval written after the request expired allows nothing (the
	// clock is still before expiresAt: undecided, it would be Pending).
	c.decide(fresh.Name, v1alpha1.ApprovalApproved, "", fresh.ExpiresAt.Add(time.Second))
	waitState(t, s, fresh.Name, call, approval.Expired)
	if err := s.Consume(ctx, fresh.Name); err == nil {
		t.Error("a late approval was consumed")
	}
	// One made in time stays usable once, even if the call that waited for
	// it comes just after expiresAt (within UseGrace), never later.
	inTime := payCall(6000)
	inTime.Timeout = time.Minute
	tk, err = s.Ask(ctx, inTime)
	if err != nil {
		t.Fatal(err)
	}
	c.decide(tk.Name, v1alpha1.ApprovalApproved, "", clk.Now())
	waitState(t, s, tk.Name, inTime, approval.Approved)
	clk.Add(time.Minute + approval.UseGrace/2)
	if st := s.Status(tk.Name, inTime); st.State != approval.Approved {
		t.Errorf("approved in time, asked just after expiresAt: %s, want Approved", st.State)
	}
	clk.Add(approval.UseGrace)
	if st := s.Status(tk.Name, inTime); st.State != approval.Expired {
		t.Errorf("approved in time, asked past the grace: %s, want Expired", st.State)
	}
	clk.Add(-approval.UseGrace)
	if err := s.Consume(ctx, tk.Name); err != nil {
		t.Errorf("consuming an approval made in time: %v", err)
	}
}

func TestStatusMismatchAndNotFound(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{})
	call := payCall(5000)
	tk, err := s.Ask(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*approval.Call){
		"agent":  func(c *approval.Call) { c.AgentID = "other-agent" },
		"tool":   func(c *approval.Call) { c.Tool = "refund" },
		"server": func(c *approval.Call) { c.Server = "other" },
		"action": func(c *approval.Call) { c.Action = "post" },
		"digest": func(c *approval.Call) { c.Digest = payCall(1).Digest },
		// What the approver was shown (TestAttackAgentWrittenRequest…).
		"preview":         func(c *approval.Call) { c.Preview = "x" },
		"reason":          func(c *approval.Call) { c.Reason = "y" },
		"rule":            func(c *approval.Call) { c.Rule = "z" },
		"policy":          func(c *approval.Call) { c.Policy = "p" },
		"service account": func(c *approval.Call) { c.ServiceAccount = "sa" },
	} {
		other := payCall(5000)
		mutate(other)
		if st := s.Status(tk.Name, other); st.State != approval.Mismatch {
			t.Errorf("another %s: %s, want Mismatch", name, st.State)
		}
	}
	// A policy edited since (new version, new bundle) or another timeout
	// leaves the request for the same call.
	same := payCall(5000)
	same.PolicyVersion, same.Revision, same.Timeout = 4, "rev-2", time.Minute
	if st := s.Status(tk.Name, same); st.State != approval.Pending {
		t.Errorf("same call, policy edited since: %s, want Pending", st.State)
	}
	if st := s.Status("no-such-request", call); st.State != approval.NotFound {
		t.Errorf("unknown name: %s, want NotFound", st.State)
	}
	if err := s.Consume(context.Background(), "no-such-request"); err == nil || !strings.Contains(err.Error(), c.ns+"/no-such-request") {
		t.Errorf("consuming an unknown request: %v, want an error naming it", err)
	}
}

// Changed fires when the watch delivers a person's approval: what a held
// call waits on. The latency from the status write to Changed is logged
// (20 approvals); only a generous bound is asserted.
func TestChangedFiresWhenAnApprovalArrives(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{})
	ctx := context.Background()
	var took []time.Duration
	for i := range 20 {
		call := payCall(float64(3000 + i))
		tk, err := s.Ask(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		// Let the watch deliver the create first, so the change waited
		// for is the approval.
		testenv.Eventually(t, "the create delivered", func() (bool, string) {
			select {
			case <-s.Changed():
				return false, "still changing"
			case <-time.After(100 * time.Millisecond):
				return true, ""
			}
		})
		var ar v1alpha1.ApprovalRequest
		if err := c.person.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: tk.Name}, &ar); err != nil {
			t.Fatal(err)
		}
		ar.Status.Decision, ar.Status.DecidedBy, ar.Status.DecidedAt = v1alpha1.ApprovalApproved, approver, &metav1.Time{Time: time.Now()}
		changed := s.Changed()
		written := time.Now()
		if err := c.person.Status().Update(ctx, &ar); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
			took = append(took, time.Since(written))
		case <-time.After(5 * time.Second):
			t.Fatal("Changed did not fire within 5 s of the approval")
		}
		if st := s.Status(tk.Name, call); st.State != approval.Approved {
			t.Errorf("after Changed: %s, want Approved", st.State)
		}
		// A new channel for the next change.
		if next := s.Changed(); next == changed {
			t.Error("Changed returned the closed channel again")
		}
	}
	slices.Sort(took)
	t.Logf("approval written (status update sent) to Changed closed, %d approvals: p50 %s, p90 %s, max %s",
		len(took), took[len(took)/2], took[len(took)*9/10], took[len(took)-1])
}

func TestAskFailsWithoutTheAPI(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		cfg := &rest.Config{Host: "http://" + testenv.FreeLoopbackAddr(t)}
		s, err := approval.NewStore(cfg, "agents", approval.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go s.Run(ctx)
		askCtx, askCancel := context.WithTimeout(ctx, time.Second)
		defer askCancel()
		if _, err := s.Ask(askCtx, payCall(5000)); err == nil || !strings.Contains(err.Error(), "agents") {
			t.Errorf("Ask with no API server: %v, want an error naming the namespace", err)
		}
	})
	t.Run("no create permission", func(t *testing.T) {
		c := newCluster(t)
		// A sidecar that may watch but not create (its Role lacks create).
		watcher := "system:serviceaccount:" + c.ns + ":watcher"
		grant(t, c.ns, "watcher", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "watcher", Namespace: c.ns},
			[]rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"approvalrequests"}, Verbs: []string{"get", "list", "watch"}}})
		if !testenv.CanEventually(t, admin, watcher, nil, "watch", v1alpha1.GroupVersion.Group, "approvalrequests", c.ns, "") {
			t.Fatal("RBAC did not apply")
		}
		c.sidecar.Impersonate.UserName = watcher
		s := c.store(approval.StoreOptions{})
		_, err := s.Ask(context.Background(), payCall(5000))
		if err == nil || !strings.Contains(err.Error(), c.ns) || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("Ask without create: %v, want forbidden, naming the namespace", err)
		}
		if n := len(c.requests()); n != 0 {
			t.Errorf("%d requests created", n)
		}
	})
}

func TestNewStoreRejectsBadOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg *rest.Config
		ns  string
		o   approval.StoreOptions
	}{
		"no config":    {nil, "agents", approval.StoreOptions{}},
		"no namespace": {adminCfg, "", approval.StoreOptions{}},
		"negative max": {adminCfg, "agents", approval.StoreOptions{MaxPendingPerAgent: -1}},
	} {
		if _, err := approval.NewStore(tc.cfg, tc.ns, tc.o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Consume writes with the version it last saw: a stale view meets a
// conflict, and the re-read decides. A condition written since (the
// operator's) is ridden out; another replica's use is ErrConsumed.
func TestConsumeFromAStaleView(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{})
	ctx := context.Background()
	for _, otherReplicaUsedIt := range []bool{false, true} {
		call := payCall(5000)
		if otherReplicaUsedIt {
			call = payCall(6000)
		}
		tk, err := s.Ask(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		c.decide(tk.Name, v1alpha1.ApprovalApproved, "", time.Now())
		stale := c.get(tk.Name)
		if otherReplicaUsedIt {
			other := c.store(approval.StoreOptions{})
			waitState(t, other, tk.Name, call, approval.Approved)
			if err := other.Consume(ctx, tk.Name); err != nil {
				t.Fatal(err)
			}
		} else {
			// The operator sets a condition: a newer version, not a use.
			ar := c.get(tk.Name)
			ar.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Approved",
				Message: "approved", LastTransitionTime: metav1.Now()}}
			if err := admin.Status().Update(ctx, &ar); err != nil {
				t.Fatal(err)
			}
		}
		// A replica that has seen only the stale version, with no watch.
		behind, err := approval.NewStore(c.sidecar, c.ns, approval.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		behind.RememberForTest(&stale)
		err = behind.Consume(ctx, tk.Name)
		switch {
		case otherReplicaUsedIt && !errors.Is(err, approval.ErrConsumed):
			t.Errorf("stale view of a used approval: %v, want ErrConsumed", err)
		case !otherReplicaUsedIt && err != nil:
			t.Errorf("stale view, only a condition written since: %v, want the use recorded", err)
		}
		if ar := c.get(tk.Name); ar.Status.ConsumedAt == nil || (!otherReplicaUsedIt && len(ar.Status.Conditions) != 1) {
			t.Errorf("stored status %+v: want consumedAt set and the condition kept", ar.Status)
		}
	}
}

// Ask made before the first list waits for it, rather than creating a
// request an identical pending one may already cover.
// A request made before this store started is NotFound until the first
// list; WaitSynced waits for it, and Status then finds it.
func TestStatusAfterWaitSynced(t *testing.T) {
	c := newCluster(t)
	first := c.store(approval.StoreOptions{})
	call := payCall(5200)
	tk, err := first.Ask(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	s, err := approval.NewStore(c.sidecar, c.ns, approval.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Status(tk.Name, call); st.State != approval.NotFound {
		t.Fatalf("before any list: %s, want NotFound (nothing listed yet)", st.State)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	if err := s.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(tk.Name, call); st.State != approval.Pending {
		t.Fatalf("after WaitSynced: %s, want Pending", st.State)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	never, err := approval.NewStore(c.sidecar, c.ns, approval.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := never.WaitSynced(stopped); err == nil {
		t.Fatal("WaitSynced of a store that never runs returned no error")
	}
}

func TestAskWaitsForTheFirstList(t *testing.T) {
	c := newCluster(t)
	first := c.store(approval.StoreOptions{})
	tk, err := first.Ask(context.Background(), payCall(5000))
	if err != nil {
		t.Fatal(err)
	}
	s, err := approval.NewStore(c.sidecar, c.ns, approval.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		tk  approval.Ticket
		err error
	}
	asked := make(chan result, 1)
	go func() {
		tk, err := s.Ask(context.Background(), payCall(5000))
		asked <- result{tk, err}
	}()
	time.Sleep(100 * time.Millisecond) // Ask is waiting: the store is not running
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	select {
	case r := <-asked:
		if r.err != nil || r.tk.Name != tk.Name {
			t.Errorf("Ask before the first list: %+v, %v; want the pending %s", r.tk, r.err, tk.Name)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Ask did not return once the store ran")
	}
}

// Code in the agent's Pod may hold the Pod's token, and so the sidecar's
// create on ApprovalRequests. It writes a request that binds its exact call
// (the digest is no secret) but shows the approver a harmless preview and
// reason; a person approves what they read. The sidecar honours neither
// that request nor its approval, and asks with its own.
func TestAttackAgentWrittenRequestWithAMisleadingPreviewIsNotHonoured(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{})
	ctx := context.Background()
	call := payCall(5000)
	agent := testenv.Impersonate(t, adminCfg, c.saUser, c.saGroups...)
	for field, forge := range map[string]func(*v1alpha1.ApprovalRequestSpec){
		"preview":        func(s *v1alpha1.ApprovalRequestSpec) { s.Preview = `{"kwargs":{"amount":5}}` },
		"reason":         func(s *v1alpha1.ApprovalRequestSpec) { s.Reason = "routine test payment, safe to approve" },
		"rule":           func(s *v1alpha1.ApprovalRequestSpec) { s.Rule = "low-risk" },
		"policy":         func(s *v1alpha1.ApprovalRequestSpec) { s.Policy = "sandbox" },
		"serviceAccount": func(s *v1alpha1.ApprovalRequestSpec) { s.ServiceAccount = "someone-else" },
	} {
		forged := &v1alpha1.ApprovalRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, GenerateName: "pay-",
				Labels: map[string]string{v1alpha1.LabelApprovalKey: call.Key(), v1alpha1.LabelApprovalAgent: approval.AgentKey(call.AgentID)}},
			Spec: v1alpha1.ApprovalRequestSpec{AgentID: call.AgentID, ServiceAccount: call.ServiceAccount, Tool: call.Tool,
				Server: call.Server, Action: call.Action, ArgumentsDigest: call.Digest, Preview: call.Preview,
				Policy: call.Policy, Rule: call.Rule, Reason: call.Reason,
				ExpiresAt: metav1.NewTime(time.Now().Add(time.Minute))},
		}
		forge(&forged.Spec)
		if err := agent.Create(ctx, forged); err != nil {
			t.Fatalf("the agent's create (the sidecar's RBAC allows it): %v", err)
		}
		c.decide(forged.Name, v1alpha1.ApprovalApproved, "looked harmless", time.Now())
		// What the forged request shows, as a call: approved in the cache.
		shown := *call
		shown.ServiceAccount, shown.Preview, shown.Policy, shown.Rule, shown.Reason = forged.Spec.ServiceAccount,
			forged.Spec.Preview, forged.Spec.Policy, forged.Spec.Rule, forged.Spec.Reason
		waitState(t, s, forged.Name, &shown, approval.Approved)
		if st := s.Status(forged.Name, call); st.State != approval.Mismatch {
			t.Errorf("forged %s, approved: %s for the real call, want Mismatch", field, st.State)
		}
	}
	// Nor is a forged pending request reused: the sidecar asks with its own.
	tk, err := s.Ask(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if ar := c.get(tk.Name); ar.Spec.Preview != call.Preview || ar.Spec.Reason != call.Reason || ar.Status.Decision != "" {
		t.Errorf("Ask returned %s: %+v, want the sidecar's own pending request", tk.Name, ar)
	}
}

// A preview with bytes that are not UTF-8 is stored with U+FFFD; the
// request still matches its call.
func TestAPreviewThatIsNotUTF8StillMatches(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{})
	call := payCall(5000)
	call.Preview = "amount \xff\xfe 5000 \xed\xa0\x80"
	call.Reason = "bad \xc3 reason"
	tk, err := s.Ask(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the request from the watch", func() (bool, string) {
		return c.get(tk.Name).ResourceVersion != "" && s.Status(tk.Name, call).State == approval.Pending,
			s.Status(tk.Name, call).State.String()
	})
	if ar := c.get(tk.Name); !utf8.ValidString(ar.Spec.Preview) || !strings.Contains(ar.Spec.Preview, "\uFFFD") {
		t.Errorf("stored preview %q", ar.Spec.Preview)
	}
	if again, err := s.Ask(context.Background(), call); err != nil || again.Name != tk.Name {
		t.Errorf("identical call: %+v, %v; want %s reused", again, err, tk.Name)
	}
}

// An approved request not yet used is found by an identical call that
// does not name it (the client went away and sent the call again), in
// preference to asking anew; once used, the identical call asks again.
func TestAskFindsAnApprovedRequestNotYetUsed(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{})
	ctx := context.Background()
	call := payCall(7000)
	tk, err := s.Ask(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	c.decide(tk.Name, v1alpha1.ApprovalApproved, "ok", time.Now())
	waitState(t, s, tk.Name, call, approval.Approved)
	again, err := s.Ask(ctx, call)
	if err != nil || again.Name != tk.Name {
		t.Fatalf("identical call after approval: %+v, %v; want the approved %s", again, err, tk.Name)
	}
	if n := len(c.requests()); n != 1 {
		t.Fatalf("%d requests, want the one", n)
	}
	if err := s.Consume(ctx, tk.Name); err != nil {
		t.Fatal(err)
	}
	if third, err := s.Ask(ctx, call); err != nil || third.Name == tk.Name {
		t.Fatalf("identical call after use: %+v, %v; want a new request", third, err)
	}
}

// TestAttackForgedRequestsDoNotFillAnotherAgentsQueue: code that may create
// ApprovalRequests in the namespace (another agent's Pod, with its own
// sidecar's token) writes requests labelled with this agent's queue and
// naming this agent, in its own ServiceAccount's name (the admission
// policy makes a ServiceAccount name itself): this agent's queue counts
// only what its own ServiceAccount asked, so its calls are still asked.
func TestAttackForgedRequestsDoNotFillAnotherAgentsQueue(t *testing.T) {
	c := newCluster(t)
	s := c.store(approval.StoreOptions{MaxPendingPerAgent: 2})
	ctx := context.Background()
	victim := payCall(3000)
	for i := range 5 {
		forged := &v1alpha1.ApprovalRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, GenerateName: "forged-", Labels: map[string]string{
				v1alpha1.LabelApprovalAgent: approval.AgentKey(victim.AgentID), v1alpha1.LabelApprovalKey: fmt.Sprintf("forged%d", i)}},
			Spec: v1alpha1.ApprovalRequestSpec{AgentID: victim.AgentID, ServiceAccount: "other-agent", Tool: "pay",
				ArgumentsDigest: victim.Digest, Policy: "pay-cap", Rule: "pay-over-cap", ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour))}}
		if err := admin.Create(ctx, forged); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the store sees the forged requests", func() (bool, string) {
		var list v1alpha1.ApprovalRequestList
		if err := admin.List(ctx, &list, client.InNamespace(c.ns)); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 5, fmt.Sprint(len(list.Items))
	})
	time.Sleep(200 * time.Millisecond) // the store's watch delivers them
	for _, amount := range []float64{3000, 3001} {
		if _, err := s.Ask(ctx, payCall(amount)); err != nil {
			t.Fatalf("the agent's own call of %v, with 5 forged requests in its name: %v", amount, err)
		}
	}
	if _, err := s.Ask(ctx, payCall(3002)); !errors.Is(err, approval.ErrQueueFull) {
		t.Fatalf("a third request of its own: %v, want ErrQueueFull (its own two count)", err)
	}
}
