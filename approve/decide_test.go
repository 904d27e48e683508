package approve

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/cli"
)

// toolgate runs the commands as the binary would: through cli.Execute, so
// the exit code is the process's. The cluster tests (RBAC and the
// admission policy, impersonated) are in test/chart/approvals_test.go.
func toolgate(t *testing.T, args ...string) (int, string) {
	t.Helper()
	root := cli.NewRootCommand(NewApproveCommand(), NewDenyCommand(), NewApprovalsCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	return cli.Execute(root), out.String()
}

// TestMalformedInput: each mistake is refused before anything reaches a
// cluster (there is none here), exit 2, saying what is wrong.
func TestMalformedInput(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "no-kubeconfig")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"approve"}, "give exactly one ApprovalRequest name, not 0 arguments"},
		{[]string{"approve", "a", "b"}, "give exactly one ApprovalRequest name, not 2 arguments"},
		{[]string{"deny"}, "give exactly one ApprovalRequest name, not 0 arguments"},
		{[]string{"approve", "Pay_5000"}, `"Pay_5000" is not an ApprovalRequest name`},
		{[]string{"approve", ""}, `"" is not an ApprovalRequest name`},
		{[]string{"deny", "pay-5000"}, "deny needs -m MESSAGE"},
		{[]string{"deny", "pay-5000", "-m", "  "}, "deny needs -m MESSAGE"},
		{[]string{"approve", "pay-5000", "-m", strings.Repeat("m", v1alpha1.MaxApprovalMessageLength+1)}, "-m is 1025 characters long: at most 1024"},
		{[]string{"approve", "pay-5000", "-n", "Team A"}, `--namespace "Team A": a lowercase RFC 1123 label`},
		{[]string{"deny", "pay-5000", "-m", "no", "-n", "-x-"}, `--namespace "-x-"`},
		{[]string{"approve", "pay-5000", "--kubeconfig", nowhere}, "no cluster to talk to"},
		{[]string{"approve", "pay-5000", "--for", "1h"}, "unknown flag: --for"},
		{[]string{"approvals", "list", "-A", "-n", "agents"}, "-A lists every namespace: give no -n agents beside it"},
		{[]string{"approvals", "list", "extra"}, `unknown command "extra"`},
		{[]string{"approvals", "list", "-n", "Team A"}, `--namespace "Team A"`},
	} {
		code, out := toolgate(t, tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("toolgate %q: exit %d, want 2 with %q\n%s", tc.args, code, tc.want, out)
		}
	}
}

// TestDecidable: a decided request says by whom, an expired one when; both
// before any write.
func TestDecidable(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := metav1.NewTime(now.Add(-time.Minute))
	ar := func(expires time.Time, s v1alpha1.ApprovalRequestStatus) *v1alpha1.ApprovalRequest {
		return &v1alpha1.ApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "pay-5000"},
			Spec: v1alpha1.ApprovalRequestSpec{ExpiresAt: metav1.NewTime(expires)}, Status: s}
	}
	if err := decidable(ar(now.Add(time.Minute), v1alpha1.ApprovalRequestStatus{}), now); err != nil {
		t.Errorf("pending, not expired: %v", err)
	}
	err := decidable(ar(now.Add(time.Minute), v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalDenied, DecidedBy: "ada", DecidedAt: &at, Message: "over budget"}), now)
	if want := `ApprovalRequest agents/pay-5000 is already Denied by ada at 2026-12-02T11:59:00Z ("over budget"): a decision is final`; err == nil || err.Error() != want {
		t.Errorf("decided: %v, want %s", err, want)
	}
	err = decidable(ar(now.Add(-90*time.Second), v1alpha1.ApprovalRequestStatus{}), now)
	if want := "ApprovalRequest agents/pay-5000 expired 90s ago (at 2026-12-02T11:58:30Z)"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("expired: %v, want %s...", err, want)
	}
}

// TestListRows: the columns, and where each request stands (as the
// sidecar reads it, approval.StateOf).
func TestListRows(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	consumed := metav1.NewTime(now)
	mk := func(name string, expiresIn time.Duration, s v1alpha1.ApprovalRequestStatus) v1alpha1.ApprovalRequest {
		return v1alpha1.ApprovalRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Minute))},
			Spec:       v1alpha1.ApprovalRequestSpec{AgentID: "billing-bot", ServiceAccount: "billing", Tool: "pay", ExpiresAt: metav1.NewTime(now.Add(expiresIn))},
			Status:     s}
	}
	items := []v1alpha1.ApprovalRequest{
		mk("pending", 3*time.Minute, v1alpha1.ApprovalRequestStatus{}),
		mk("lapsed", -time.Minute, v1alpha1.ApprovalRequestStatus{}),
		mk("used", time.Minute, v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalApproved, ConsumedAt: &consumed}),
		mk("refused", time.Minute, v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalDenied}),
		mk("approved", time.Minute, v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalApproved}),
	}
	items[0].Spec.AgentID = ""
	tb := table{now: func() time.Time { return now }}
	tb.widen(items)
	var out bytes.Buffer
	tb.header(&out)
	for i := range items {
		tb.row(&out, &items[i], "")
	}
	want := `NAME       AGENT         TOOL   DECISION   AGE     EXPIRES
pending    sa:billing    pay    Pending    2m      in 3m
lapsed     billing-bot   pay    Expired    2m      60s ago
used       billing-bot   pay    Consumed   2m      in 60s
refused    billing-bot   pay    Denied     2m      in 60s
approved   billing-bot   pay    Approved   2m      in 60s
`
	if out.String() != want {
		t.Errorf("rows:\n%s\nwant:\n%s", out.String(), want)
	}
}
