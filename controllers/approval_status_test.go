package controllers

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

func approvalAt(expires time.Time, edit func(*v1alpha1.ApprovalRequestStatus)) *v1alpha1.ApprovalRequest {
	ar := &v1alpha1.ApprovalRequest{ObjectMeta: metav1.ObjectMeta{Name: "pay-1", Namespace: "shop", Generation: 1},
		Spec: v1alpha1.ApprovalRequestSpec{AgentID: "shop-agent", Tool: "pay", ExpiresAt: metav1.NewTime(expires)}}
	if edit != nil {
		edit(&ar.Status)
	}
	return ar
}

// The Ready condition for each state, a pure function of the object and
// the clock; when the request must be looked at again (expiresAt) and
// when it finished (what retention counts from).
func TestApprovalState(t *testing.T) {
	now := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	consumed := metav1.NewTime(now.Add(-30 * time.Second))
	approve := func(s *v1alpha1.ApprovalRequestStatus) { s.Decision, s.DecidedBy = v1alpha1.ApprovalApproved, "alice" }
	for _, tt := range []struct {
		name       string
		ar         *v1alpha1.ApprovalRequest
		reason     string
		status     metav1.ConditionStatus
		message    string
		expiresAt  time.Time
		finishedAt time.Time
		kstatus    status.Status
	}{
		{"undecided", approvalAt(later, nil), "Pending", metav1.ConditionFalse, "waiting", later, time.Time{}, status.InProgressStatus},
		{"undecided at the very expiry", approvalAt(now, nil), "Expired", metav1.ConditionFalse, "APPROVAL_TIMEOUT", time.Time{}, now, status.FailedStatus},
		{"undecided past expiry", approvalAt(earlier, nil), "Expired", metav1.ConditionFalse, "nobody decided", time.Time{}, earlier, status.FailedStatus},
		{"approved", approvalAt(later, approve), "Approved", metav1.ConditionTrue, "approved by alice", later, time.Time{}, status.CurrentStatus},
		{"approved, unused past expiry", approvalAt(earlier, approve), "Expired", metav1.ConditionFalse, "not used", time.Time{}, earlier, status.FailedStatus},
		{"denied", approvalAt(later, func(s *v1alpha1.ApprovalRequestStatus) { s.Decision, s.DecidedBy = v1alpha1.ApprovalDenied, "bob" }),
			"Denied", metav1.ConditionTrue, "denied by bob", time.Time{}, now, status.CurrentStatus},
		{"consumed", approvalAt(later, func(s *v1alpha1.ApprovalRequestStatus) { approve(s); s.ConsumedAt = &consumed }),
			"Consumed", metav1.ConditionTrue, "the call ran", time.Time{}, consumed.Time, status.CurrentStatus},
		{"consumed, then expired", approvalAt(earlier, func(s *v1alpha1.ApprovalRequestStatus) { approve(s); s.ConsumedAt = &consumed }),
			"Consumed", metav1.ConditionTrue, "the call ran", time.Time{}, consumed.Time, status.CurrentStatus},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := approvalState(tt.ar, now)
			c := v.ready
			if c.Type != v1alpha1.ConditionReady || c.Reason != tt.reason || c.Status != tt.status || c.ObservedGeneration != 1 ||
				!strings.Contains(c.Message, tt.message) {
				t.Errorf("Ready %+v, want %s %s with %q, observedGeneration 1", c, tt.status, tt.reason, tt.message)
			}
			if !v.expiresAt.Equal(tt.expiresAt) || !v.finishedAt.Equal(tt.finishedAt) {
				t.Errorf("expiresAt %s finishedAt %s, want %s and %s", v.expiresAt, v.finishedAt, tt.expiresAt, tt.finishedAt)
			}
			// As kstatus (Flux, Argo CD, kstatus waits) reads the object.
			ar := tt.ar.DeepCopy()
			ar.APIVersion, ar.Kind = v1alpha1.GroupVersion.String(), "ApprovalRequest"
			ar.Status.Conditions = v.conditions(ar)
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ar)
			if err != nil {
				t.Fatal(err)
			}
			res, err := status.Compute(&unstructured.Unstructured{Object: u})
			if err != nil || res.Status != tt.kstatus {
				t.Errorf("kstatus %v (%v), want %s", res, err, tt.kstatus)
			}
		})
	}
}

// The transition time moves only with the state, and an unchanged
// condition is no write.
func TestApprovalConditionTransitionTime(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	ar := approvalAt(t0.Add(time.Hour), nil)
	ar.Status.Conditions = approvalState(ar, t0).conditions(ar)
	if got := approvalState(ar, t0.Add(time.Minute)).conditions(ar); got != nil {
		t.Fatalf("a pending request a minute later rewrites its conditions: %+v", got)
	}
	ar.Status.Decision, ar.Status.DecidedBy = v1alpha1.ApprovalDenied, "bob"
	t1 := t0.Add(2 * time.Minute)
	v := approvalState(ar, t1)
	conds := v.conditions(ar)
	if len(conds) != 1 || !conds[0].LastTransitionTime.Time.Equal(t1) || !v.finishedAt.Equal(t1) {
		t.Fatalf("denied: conditions %+v finishedAt %s, want one moved to %s", conds, v.finishedAt, t1)
	}
	ar.Status.Conditions = conds
	if v := approvalState(ar, t1.Add(time.Hour)); !v.finishedAt.Equal(t1) || v.conditions(ar) != nil {
		t.Fatalf("denied an hour later: finishedAt %s (want %s), rewrite %v", v.finishedAt, t1, v.conditions(ar))
	}
}

// Each outcome counts once per request, whatever the operator saw of the
// way: a request first seen consumed counts requested, approved and
// consumed; one seen pending, then consumed, counts approved and consumed
// at the second look; nothing counts twice.
func TestNewOutcomes(t *testing.T) {
	for _, tt := range []struct {
		prev, now string
		decision  v1alpha1.ApprovalDecision
		want      []string
	}{
		{"", "Pending", "", []string{"requested"}},
		{"", "Consumed", v1alpha1.ApprovalApproved, []string{"requested", "approved", "consumed"}},
		{"", "Expired", "", []string{"requested", "expired"}},
		{"Pending", "Approved", v1alpha1.ApprovalApproved, []string{"approved"}},
		{"Pending", "Consumed", v1alpha1.ApprovalApproved, []string{"approved", "consumed"}},
		{"Pending", "Denied", v1alpha1.ApprovalDenied, []string{"denied"}},
		{"Pending", "Expired", "", []string{"expired"}},
		{"Approved", "Expired", v1alpha1.ApprovalApproved, []string{"expired"}},
		{"Approved", "Consumed", v1alpha1.ApprovalApproved, []string{"consumed"}},
		{"Expired", "Consumed", v1alpha1.ApprovalApproved, []string{"consumed"}},
		{"Denied", "Denied", v1alpha1.ApprovalDenied, nil},
	} {
		if got := newOutcomes(tt.prev, tt.now, tt.decision); !slices.Equal(got, tt.want) {
			t.Errorf("%s -> %s (%s): %v, want %v", tt.prev, tt.now, tt.decision, got, tt.want)
		}
	}
}

// The request Event names the call and keeps both approve commands whole
// within the events API's 1024 bytes, however long the reason.
func TestRequestNoteKeepsTheCommands(t *testing.T) {
	ar := approvalAt(time.Now(), nil)
	ar.Spec.Server, ar.Spec.Action = "payments", "charge"
	for _, reason := range []string{"payments over 1000 need a human", strings.Repeat("é", 1000)} {
		ar.Spec.Reason = reason
		note := requestNote(ar)
		if len(note) > maxEventNote {
			t.Errorf("note of %d bytes", len(note))
		}
		for _, want := range []string{`agent "shop-agent"`, "pay on server payments (action charge)", "toolgate approve pay-1 -n shop",
			`kubectl patch approvalrequest pay-1 -n shop --subresource=status --type=merge -p '{"status":{"decision":"Approved","decidedBy":"<you>"}}'`} {
			if !strings.Contains(note, want) {
				t.Errorf("note %q lacks %q", note, want)
			}
		}
	}
}

func TestApprovalOptionsValidate(t *testing.T) {
	for _, o := range []ApprovalOptions{{}, {NotifyURL: "https://hooks.example.com/x"}, {NotifyURL: "http://127.0.0.1:8080", NotifyAuthHeaderFile: "/f"}} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for name, o := range map[string]ApprovalOptions{
		"negative retention": {Retention: -time.Second},
		"no scheme":          {NotifyURL: "hooks.example.com"},
		"other scheme":       {NotifyURL: "file:///etc/passwd"},
		"credentials":        {NotifyURL: "https://u:p@hooks.example.com"},
		"auth without URL":   {NotifyAuthHeaderFile: "/f"},
		"negative attempts":  {NotifyURL: "https://h", NotifyAttempts: -1},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%s: %+v accepted", name, o)
		}
	}
}
