package v1alpha1

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSidecarReportRoundTrip: what a sidecar writes is what the operator
// reads back, refusal and version included.
func TestSidecarReportRoundTrip(t *testing.T) {
	t.Parallel()
	r := NewSidecarReport("rev-9", []string{FreezeName("FrozenAgent", "stop-billing"), FreezeName("ClusterFrozenAgent", "incident-42")}, "v1.2.3")
	r.Refused("rev-10", "unknown_key: bundle signed by a key this sidecar does not trust")
	got, err := ParseSidecarReport(r.Annotations())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
	}
	if want := []string{"ClusterFrozenAgent/incident-42", "FrozenAgent/stop-billing"}; !reflect.DeepEqual(got.Frozen, want) {
		t.Errorf("Frozen = %v, want sorted %v", got.Frozen, want)
	}
	if !got.Applies("FrozenAgent/stop-billing", "") || got.Applies("FrozenAgent/other", "") {
		t.Errorf("Applies: listed names only, got %+v", got)
	}

	// A report without a refusal or freezes: no refusal keys, an empty list.
	plain := NewSidecarReport("", nil, "dev")
	a := plain.Annotations()
	for _, k := range []string{AnnotationLeaseRefusedRevision, AnnotationLeaseRefusedReason, AnnotationLeaseFrozenTruncated} {
		if _, ok := a[k]; ok {
			t.Errorf("annotation %s written for a report without it: %v", k, a)
		}
	}
	back, err := ParseSidecarReport(a)
	if err != nil {
		t.Fatal(err)
	}
	if back.Revision != "" || len(back.Frozen) != 0 || back.FreezeDigest != FreezeDigest(nil) || back.Version != "dev" {
		t.Errorf("empty report read back as %+v", back)
	}

	// A refusal without a reason still says refused; a long one is capped
	// and stays valid UTF-8.
	var r2 SidecarReport
	r2.Refused("", "")
	if r2.RefusedReason != "refused" {
		t.Errorf("empty reason: %q", r2.RefusedReason)
	}
	r2.Refused("rev-1", strings.Repeat("é", MaxLeaseReasonBytes))
	if len(r2.RefusedReason) > MaxLeaseReasonBytes || !strings.HasSuffix(r2.RefusedReason, "...") {
		t.Errorf("long reason: %d bytes, %q...", len(r2.RefusedReason), r2.RefusedReason[:16])
	}
	if strings.ToValidUTF8(r2.RefusedReason, "?") != r2.RefusedReason {
		t.Error("the capped reason is not valid UTF-8")
	}
}

// TestSidecarReportTruncatesAt64Names: past MaxLeaseFrozenNames the list
// is cut and marked truncated, the digest still covers every name, and
// Applies then trusts the digest only when it equals the one wanted.
func TestSidecarReportTruncatesAt64Names(t *testing.T) {
	t.Parallel()
	var names []string
	for i := range MaxLeaseFrozenNames + 6 {
		names = append(names, FreezeName("FrozenAgent", fmt.Sprintf("f-%03d", i)))
	}
	exact := NewSidecarReport("r", names[:MaxLeaseFrozenNames], "v")
	if exact.FrozenTruncated || len(exact.Frozen) != MaxLeaseFrozenNames {
		t.Errorf("%d names: truncated=%v, %d listed", MaxLeaseFrozenNames, exact.FrozenTruncated, len(exact.Frozen))
	}
	r := NewSidecarReport("r", names, "v")
	if !r.FrozenTruncated || len(r.Frozen) != MaxLeaseFrozenNames {
		t.Fatalf("%d names: truncated=%v, %d listed", len(names), r.FrozenTruncated, len(r.Frozen))
	}
	all := FreezeDigest(names)
	if r.FreezeDigest != all {
		t.Errorf("digest %s covers only the listed names, want %s", r.FreezeDigest, all)
	}
	a := r.Annotations()
	if a[AnnotationLeaseFrozenTruncated] != "true" || strings.Count(a[AnnotationLeaseFrozen], ",") != MaxLeaseFrozenNames-1 {
		t.Errorf("annotations: truncated=%q, %d names", a[AnnotationLeaseFrozenTruncated], strings.Count(a[AnnotationLeaseFrozen], ",")+1)
	}
	back, err := ParseSidecarReport(a)
	if err != nil {
		t.Fatal(err)
	}
	last := names[len(names)-1]
	switch {
	case !back.Applies(last, all):
		t.Errorf("a name left out is not applied by a digest equal to the one wanted")
	case back.Applies(last, FreezeDigest(names[:3])):
		t.Errorf("a name left out is applied by a different digest")
	case back.Applies(last, ""):
		t.Errorf("a name left out is applied with no digest wanted")
	}
}

// TestFreezeDigestIgnoresOrderAndDuplicates: the digest is over the set.
func TestFreezeDigestIgnoresOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	a := []string{"FrozenAgent/a", "ClusterFrozenAgent/b", "FrozenAgent/c"}
	b := []string{"FrozenAgent/c", "FrozenAgent/a", "ClusterFrozenAgent/b", "FrozenAgent/a"}
	if FreezeDigest(a) != FreezeDigest(b) {
		t.Errorf("order or duplicates change the digest: %s vs %s", FreezeDigest(a), FreezeDigest(b))
	}
	if FreezeDigest(a) == FreezeDigest(a[:2]) || FreezeDigest(nil) == FreezeDigest(a) {
		t.Error("different sets share a digest")
	}
	if d := FreezeDigest(nil); len(d) != 32 {
		t.Errorf("the empty set's digest %q is not 16 bytes of hex", d)
	}
	// The caller's slice is left as it was.
	if b[0] != "FrozenAgent/c" {
		t.Errorf("FreezeDigest sorted its argument: %v", b)
	}
}

// TestParseSidecarReportRefusesMalformed: a Lease that is not a sidecar's,
// or says more than a sidecar writes, is an error naming the annotation.
func TestParseSidecarReportRefusesMalformed(t *testing.T) {
	t.Parallel()
	good := NewSidecarReport("r", []string{"FrozenAgent/a"}, "v").Annotations()
	with := func(k, v string) map[string]string {
		a := map[string]string{}
		for kk, vv := range good {
			a[kk] = vv
		}
		if v == "<delete>" {
			delete(a, k)
		} else {
			a[k] = v
		}
		return a
	}
	var many []string
	for i := range MaxLeaseFrozenNames + 1 {
		many = append(many, fmt.Sprintf("FrozenAgent/x%d", i))
	}
	for name, tc := range map[string]struct {
		a    map[string]string
		want string
	}{
		"nil":                {nil, AnnotationLeaseRevision},
		"no revision":        {with(AnnotationLeaseRevision, "<delete>"), "not a sidecar report"},
		"no digest":          {with(AnnotationLeaseFreezeDigest, "<delete>"), AnnotationLeaseFreezeDigest},
		"too many names":     {with(AnnotationLeaseFrozen, strings.Join(many, ",")), "more than 64"},
		"truncated is maybe": {with(AnnotationLeaseFrozenTruncated, "maybe"), `"maybe", not true or false`},
	} {
		if _, err := ParseSidecarReport(tc.a); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
	if r, err := ParseSidecarReport(with(AnnotationLeaseFrozenTruncated, "false")); err != nil || r.FrozenTruncated {
		t.Errorf("truncated=false: %+v, %v", r, err)
	}
}

// TestLeaseLive: live until renew + duration, the default duration when
// none is given, never for a Lease never renewed.
func TestLeaseLive(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		renew    time.Time
		duration int32
		want     bool
	}{
		{now.Add(-29 * time.Second), 30, true},
		{now.Add(-30 * time.Second), 30, false},
		{now.Add(-5 * time.Second), 4, false},
		{now.Add(-29 * time.Second), 0, true},
		{now.Add(-31 * time.Second), -1, false},
		{time.Time{}, 30, false},
	} {
		if got := LeaseLive(tc.renew, tc.duration, now); got != tc.want {
			t.Errorf("LeaseLive(now-%v, %d) = %v, want %v", now.Sub(tc.renew), tc.duration, got, tc.want)
		}
	}
}
