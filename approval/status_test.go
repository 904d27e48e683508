package approval

import (
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

func TestStateOf(t *testing.T) {
	expires := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	before, after := expires.Add(-time.Second), expires.Add(time.Second)
	at := func(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }
	for _, tc := range []struct {
		name   string
		status v1alpha1.ApprovalRequestStatus
		now    time.Time
		want   State
	}{
		{"undecided", v1alpha1.ApprovalRequestStatus{}, before, Pending},
		{"undecided at expiresAt", v1alpha1.ApprovalRequestStatus{}, expires, Pending},
		{"undecided past expiresAt", v1alpha1.ApprovalRequestStatus{}, after, Expired},
		{"approved in time", v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalApproved, DecidedAt: at(before)}, before, Approved},
		{"approved in time, used just after expiresAt", v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalApproved, DecidedAt: at(before)}, after, Approved},
		{"approved in time, used past the grace", v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalApproved, DecidedAt: at(before)}, expires.Add(UseGrace + time.Second), Expired},
		{"approved late", v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalApproved, DecidedAt: at(after)}, after, Expired},
		{"approved, no decidedAt, in time", v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalApproved}, before, Approved},
		{"approved, no decidedAt, late", v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalApproved}, after, Expired},
		{"denied", v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalDenied, DecidedAt: at(before)}, after, Denied},
		{"unknown decision", v1alpha1.ApprovalRequestStatus{Decision: "Maybe"}, before, Denied},
		{"consumed", v1alpha1.ApprovalRequestStatus{Decision: v1alpha1.ApprovalApproved, DecidedAt: at(before), ConsumedAt: at(before)}, before, Consumed},
	} {
		ar := &v1alpha1.ApprovalRequest{Spec: v1alpha1.ApprovalRequestSpec{ExpiresAt: metav1.NewTime(expires)}, Status: tc.status}
		if got := StateOf(ar, tc.now); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestNamePrefix(t *testing.T) {
	for tool, want := range map[string]string{
		"pay":                     "pay-",
		"delete_file":             "delete-file-",
		"GitHub.Create Issue!":    "github-create-issue-",
		"__x__":                   "x-",
		"":                        "call-",
		"日本":                      "call-",
		"mcp__srv__tool":          "mcp-srv-tool-",
		string(make([]byte, 300)): "call-",
		"a-very-long-tool-name-that-goes-on-and-on-and-on": "a-very-long-tool-name-that-goes-on-and-o-",
	} {
		if got := namePrefix(tool); got != want {
			t.Errorf("namePrefix(%q) = %q, want %q", tool, got, want)
		}
	}
}

func TestCutUTF8(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"}, {"abc", 3, "abc"}, {"abcd", 3, "abc"},
		{"aé", 2, "a"}, {"aé", 3, "aé"}, {"😀😀", 5, "😀"}, {"😀", 3, ""},
	} {
		got := cutUTF8(tc.s, tc.n)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("cutUTF8(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
