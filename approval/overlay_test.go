package approval

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// The overlay, without a watch: the informer's store is filled by hand as
// the watch would, so what Status sees between a write and its delivery is
// checked without a race.
func TestOverlayUntilTheWatchCatchesUp(t *testing.T) {
	s, err := NewStore(&rest.Config{Host: "http://127.0.0.1:1"}, "agents", StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cache := s.informer.GetStore()
	version := func(rv string, decision v1alpha1.ApprovalDecision) *v1alpha1.ApprovalRequest {
		return &v1alpha1.ApprovalRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "pay-abcde", ResourceVersion: rv,
				Labels: map[string]string{v1alpha1.LabelApprovalKey: "k", v1alpha1.LabelApprovalAgent: "a"}},
			Spec:   v1alpha1.ApprovalRequestSpec{ExpiresAt: metav1.NewTime(time.Now().Add(time.Minute))},
			Status: v1alpha1.ApprovalRequestStatus{Decision: decision},
		}
	}
	rv := func() string {
		if ar := s.get("pay-abcde"); ar != nil {
			return ar.ResourceVersion
		}
		return "none"
	}

	// Ask's create: seen before the watch delivers it, and by label.
	s.remember(version("10", ""))
	if got := rv(); got != "10" {
		t.Fatalf("after the create: version %s, want 10", got)
	}
	if n := len(s.byLabel(indexKey, v1alpha1.LabelApprovalKey, "k")); n != 1 {
		t.Errorf("by key: %d requests, want 1", n)
	}
	// The watch delivers it: the overlay lets go.
	deliver := func(ar *v1alpha1.ApprovalRequest) {
		t.Helper()
		if err := cache.Update(ar); err != nil {
			t.Fatal(err)
		}
		s.seen(ar, false)
	}
	deliver(version("10", ""))
	if _, own := s.overlay["pay-abcde"]; own {
		t.Error("the overlay kept a version the watch delivered")
	}
	// A person approves (11), Consume writes 12; the watch is still at 11.
	deliver(version("11", v1alpha1.ApprovalApproved))
	s.remember(version("12", v1alpha1.ApprovalApproved))
	if got := rv(); got != "12" {
		t.Errorf("own write ahead of the watch: version %s, want 12", got)
	}
	// Remembering an older read changes nothing.
	s.remember(version("11", v1alpha1.ApprovalApproved))
	if got := rv(); got != "12" {
		t.Errorf("after an older read: version %s, want 12", got)
	}
	// The watch jumps past it (a relist): the cache wins.
	deliver(version("14", v1alpha1.ApprovalApproved))
	if got := rv(); got != "14" {
		t.Errorf("watch past the own write: version %s, want 14", got)
	}
	if len(s.overlay) != 0 {
		t.Errorf("overlay %v, want empty", s.overlay)
	}
	// A delete clears the overlay too.
	s.remember(version("15", v1alpha1.ApprovalApproved))
	if err := cache.Delete(version("14", "")); err != nil {
		t.Fatal(err)
	}
	s.seen(version("16", ""), true)
	if got := rv(); got != "none" {
		t.Errorf("after delete: version %s, want none", got)
	}
	// Every event wakes Changed's waiters, each on a new channel.
	ch := s.Changed()
	s.seen(version("17", ""), false)
	select {
	case <-ch:
	default:
		t.Error("Changed not closed by an event")
	}
	if s.Changed() == ch {
		t.Error("Changed still returns the closed channel")
	}
}
