package controllers

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

var unitNow = time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)

func unitPod(name, uid string, edit func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if edit != nil {
		edit(&p)
	}
	return p
}

func unitLease(pod, ownerUID string, renewedAgo time.Duration, duration int32, annotations map[string]string) coordinationv1.Lease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: pod, Annotations: annotations},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: unitNow.Add(-renewedAgo)}, LeaseDurationSeconds: ptr.To(duration)}}
	if ownerUID != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: types.UID(ownerUID)}}
	}
	return l
}

func reportOf(revision string, frozen ...string) map[string]string {
	return v1alpha1.NewSidecarReport(revision, frozen, "test").Annotations()
}

func TestSidecarsOf(t *testing.T) {
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: unitNow} }
	finished := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	for _, tc := range []struct {
		name   string
		pods   []corev1.Pod
		leases []coordinationv1.Lease
		want   string // pod:revision, "-" when unreporting
		next   time.Duration
	}{
		{name: "nothing"},
		{name: "pods without leases are unreporting", pods: []corev1.Pod{unitPod("b", "ub", nil), unitPod("a", "ua", nil)}, want: "a:- b:-"},
		{name: "finished and deleting pods are not live", pods: []corev1.Pod{unitPod("a", "ua", deleting), unitPod("b", "ub", finished)},
			leases: []coordinationv1.Lease{unitLease("a", "ua", 0, 30, reportOf("r1"))}},
		{name: "live lease of an injected pod", pods: []corev1.Pod{unitPod("a", "ua", nil)},
			leases: []coordinationv1.Lease{unitLease("a", "ua", 5*time.Second, 30, reportOf("r1"))}, want: "a:r1", next: 25 * time.Second},
		{name: "expired lease", pods: []corev1.Pod{unitPod("a", "ua", nil)},
			leases: []coordinationv1.Lease{unitLease("a", "ua", 31*time.Second, 30, reportOf("r1"))}, want: "a:-"},
		{name: "lease duration honoured", pods: []corev1.Pod{unitPod("a", "ua", nil)},
			leases: []coordinationv1.Lease{unitLease("a", "ua", 3*time.Second, 2, reportOf("r1"))}, want: "a:-"},
		{name: "a former pod's lease of the same name", pods: []corev1.Pod{unitPod("a", "new", nil)},
			leases: []coordinationv1.Lease{unitLease("a", "old", 0, 30, reportOf("r1"))}, want: "a:-"},
		{name: "a lease without a pod is a sidecar too", leases: []coordinationv1.Lease{unitLease("z", "", time.Second, 30, reportOf("r2"))},
			want: "z:r2", next: 29 * time.Second},
		{name: "a lease that does not parse is unreporting", pods: []corev1.Pod{unitPod("a", "ua", nil)},
			leases: []coordinationv1.Lease{unitLease("a", "ua", 0, 30, map[string]string{"other": "x"})}, want: "a:-", next: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live, next := sidecarsOf(tc.pods, tc.leases, unitNow)
			var got []string
			for _, s := range live {
				rev := "-"
				if s.report != nil {
					rev = s.report.Revision
				}
				got = append(got, s.pod+":"+rev)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("sidecars %q, want %q", strings.Join(got, " "), tc.want)
			}
			var gotNext time.Duration
			if !next.IsZero() {
				gotNext = next.Sub(unitNow)
			}
			if gotNext != tc.next {
				t.Errorf("next expiry in %v, want %v", gotNext, tc.next)
			}
		})
	}
}

func TestWithEnforcement(t *testing.T) {
	history := newRevisionHistory()
	history.record("ns", "r1", map[types.UID]int64{"p": 1, "f": 1})
	history.record("ns", "r2", map[types.UID]int64{"p": 2, "f": 1})
	history.setFreezeDigest("ns", v1alpha1.FreezeDigest([]string{"FrozenAgent/f"}))
	h := history.revisions("ns")
	policy := &metav1.ObjectMeta{UID: "p", Generation: 2}
	freeze := &metav1.ObjectMeta{UID: "f", Generation: 2, Name: "f"} // generation 2 is in no revision
	ready := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 2, Reason: v1alpha1.ReasonPublished}}
	report := func(revision string, edit func(*v1alpha1.SidecarReport)) *v1alpha1.SidecarReport {
		r := v1alpha1.NewSidecarReport(revision, nil, "test")
		if edit != nil {
			edit(&r)
		}
		return &r
	}
	refused := func(r *v1alpha1.SidecarReport) { r.Refused("r3", "untrusted key") }
	for _, tc := range []struct {
		name       string
		obj        metav1.Object
		freeze     string
		conds      []metav1.Condition
		sidecars   []sidecar
		status     metav1.ConditionStatus
		reason     string
		summary    string
		messageHas string
		counts     [4]int32 // current, stale, refusing, unreporting
	}{
		{name: "no sidecars", obj: policy, conds: ready, status: metav1.ConditionTrue, reason: v1alpha1.ReasonNoSidecars, summary: "0/0"},
		{name: "not published", obj: policy, conds: nil, sidecars: []sidecar{{pod: "a", report: report("r2", nil)}},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonNotPublished, summary: "1/1", counts: [4]int32{1, 0, 0, 0}},
		{name: "ready for an older generation", obj: policy, conds: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1}},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonNotPublished, summary: "0/0"},
		{name: "all current", obj: policy, conds: ready, sidecars: []sidecar{{pod: "a", report: report("r2", nil)}, {pod: "b", report: report("r2", nil)}},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonAllSidecarsCurrent, summary: "2/2", counts: [4]int32{2, 0, 0, 0}},
		{name: "stale names the first stale pod", obj: policy, conds: ready,
			sidecars: []sidecar{{pod: "a", report: report("r2", nil)}, {pod: "b", report: report("r1", nil)}, {pod: "c", report: report("unknown", nil)}},
			status:   metav1.ConditionFalse, reason: v1alpha1.ReasonSidecarsStale, summary: "1/3", messageHas: `Pod b serves revision "r1"`, counts: [4]int32{1, 2, 0, 0}},
		{name: "refusing wins over stale and unreporting", obj: policy, conds: ready,
			sidecars: []sidecar{{pod: "a"}, {pod: "b", report: report("r1", nil)}, {pod: "c", report: report("r1", refused)}},
			status:   metav1.ConditionFalse, reason: v1alpha1.ReasonSidecarRefusing, summary: "0/3", messageHas: `Pod c refused revision "r3": untrusted key`, counts: [4]int32{0, 1, 1, 1}},
		{name: "a refusal of an older bundle while serving the current one is current", obj: policy, conds: ready,
			sidecars: []sidecar{{pod: "a", report: report("r2", refused)}},
			status:   metav1.ConditionTrue, reason: v1alpha1.ReasonAllSidecarsCurrent, summary: "1/1", counts: [4]int32{1, 0, 0, 0}},
		{name: "unreporting", obj: policy, conds: ready, sidecars: []sidecar{{pod: "a", report: report("r2", nil)}, {pod: "b"}},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonSidecarsUnreporting, summary: "1/2", messageHas: "Pod b", counts: [4]int32{1, 0, 0, 1}},
		{name: "freeze named", obj: freeze, freeze: "FrozenAgent/f", conds: ready,
			sidecars: []sidecar{{pod: "a", report: report("old", func(r *v1alpha1.SidecarReport) { *r = v1alpha1.NewSidecarReport("old", []string{"FrozenAgent/f"}, "") })}},
			status:   metav1.ConditionTrue, reason: v1alpha1.ReasonAllSidecarsCurrent, summary: "1/1", counts: [4]int32{1, 0, 0, 0}},
		{name: "freeze covered by a truncated list's digest", obj: freeze, freeze: "FrozenAgent/f", conds: ready,
			sidecars: []sidecar{{pod: "a", report: report("old", func(r *v1alpha1.SidecarReport) {
				r.FrozenTruncated, r.FreezeDigest = true, v1alpha1.FreezeDigest([]string{"FrozenAgent/f"})
			})}},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonAllSidecarsCurrent, summary: "1/1", counts: [4]int32{1, 0, 0, 0}},
		{name: "freeze not named, list complete", obj: freeze, freeze: "FrozenAgent/f", conds: ready,
			sidecars: []sidecar{{pod: "a", report: report("r2", func(r *v1alpha1.SidecarReport) { r.FreezeDigest = v1alpha1.FreezeDigest([]string{"FrozenAgent/f"}) })}},
			status:   metav1.ConditionFalse, reason: v1alpha1.ReasonSidecarsStale, summary: "0/1", counts: [4]int32{0, 1, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current := servesGeneration(h, tc.obj)
			if tc.freeze != "" {
				current = appliesFreeze(h, tc.obj, tc.freeze)
			}
			st, conds := withEnforcement(tc.conds, tc.obj.GetGeneration(), tallyOf(tc.sidecars, current, ""), "the namespace", unitNow)
			c := apimeta.FindStatusCondition(conds, v1alpha1.ConditionEnforced)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != tc.obj.GetGeneration() || !strings.Contains(c.Message, tc.messageHas) {
				t.Fatalf("Enforced %+v, want %s %s with %q", c, tc.status, tc.reason, tc.messageHas)
			}
			if st.Summary != tc.summary || [4]int32{st.Current, st.Stale, st.Refusing, st.Unreporting} != tc.counts ||
				st.Sidecars != st.Current+st.Stale+st.Refusing+st.Unreporting {
				t.Fatalf("enforcement %+v, want summary %s and counts %v", *st, tc.summary, tc.counts)
			}
			if len(tc.conds) > 0 && len(conds) != len(tc.conds)+1 {
				t.Fatalf("conditions %+v: Enforced added beside, not instead of, the others", conds)
			}
		})
	}
}

func TestTallyAddsNamespaces(t *testing.T) {
	current := func(r v1alpha1.SidecarReport) bool { return r.Revision == "ok" }
	ok, stale := v1alpha1.NewSidecarReport("ok", nil, ""), v1alpha1.NewSidecarReport("old", nil, "")
	var total tally
	total.add(tallyOf([]sidecar{{pod: "a", report: &ok}}, current, "ns1/"))
	total.add(tallyOf([]sidecar{{pod: "a", report: &stale}, {pod: "b"}}, current, "ns2/"))
	total.add(tallyOf([]sidecar{{pod: "c", report: &stale}}, current, "ns3/"))
	st, conds := withEnforcement([]metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1}},
		1, total, "the 3 namespaces it selects", unitNow)
	c := apimeta.FindStatusCondition(conds, v1alpha1.ConditionEnforced)
	if st.Summary != "1/4" || st.Stale != 2 || st.Unreporting != 1 || c.Reason != v1alpha1.ReasonSidecarsStale || !strings.Contains(c.Message, "Pod ns2/a") {
		t.Fatalf("summed %+v, %+v", *st, c)
	}
}

func TestRevisionHistoryIsBounded(t *testing.T) {
	h := newRevisionHistory()
	for i := range 3 * revisionHistoryDepth {
		h.record("ns", string(rune('a'+i)), map[types.UID]int64{"p": int64(i)})
	}
	got := h.revisions("ns")
	if len(got.published) != revisionHistoryDepth {
		t.Fatalf("%d revisions remembered, want %d", len(got.published), revisionHistoryDepth)
	}
	last := 3*revisionHistoryDepth - 1
	if !got.contains(string(rune('a'+last)), "p", int64(last)) || got.contains("a", "p", 0) {
		t.Fatalf("history %+v keeps the wrong revisions", got.published)
	}
	// Republishing a known revision moves it to the newest place with the
	// newer generations.
	h.record("ns", string(rune('a'+last-3)), map[types.UID]int64{"p": 99})
	if got := h.revisions("ns"); !got.contains(string(rune('a'+last-3)), "p", 99) || len(got.published) != revisionHistoryDepth {
		t.Fatalf("republished revision not moved: %+v", got.published)
	}
	h.forget("ns")
	if got := h.revisions("ns"); len(got.published) != 0 || got.contains(string(rune('a'+last)), "p", int64(last)) {
		t.Fatalf("forgotten namespace still has %+v", got.published)
	}
}

func TestSlimPodKeepsOnlyWhatSidecarsOfReads(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u", Labels: map[string]string{"x": "y"},
		Annotations: map[string]string{"big": strings.Repeat("x", 1000)}, DeletionTimestamp: &metav1.Time{Time: unitNow}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1"}}
	out, err := slimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Pod)
	if s.Name != "a" || s.Namespace != "ns" || s.UID != "u" || s.Labels["x"] != "y" || s.DeletionTimestamp == nil || s.Status.Phase != corev1.PodRunning {
		t.Fatalf("slimmed away what is read: %+v", s)
	}
	if len(s.Annotations) != 0 || len(s.Spec.Containers) != 0 || s.Status.PodIP != "" {
		t.Fatalf("kept what is not read: %+v", s)
	}
	if again, _ := slimPod(s); again.(*corev1.Pod).Name != "a" {
		t.Fatal("not idempotent")
	}
	if other, _ := slimPod("not a pod"); other != "not a pod" {
		t.Fatal("a non-Pod was changed")
	}
}

func TestOutcomeStoreRecordsWhatWentLive(t *testing.T) {
	s := newOutcomeStore()
	gens := map[types.UID]int64{"f": 1}
	s.set("ns", outcome{revision: "r1", generations: gens})
	s.set("ns", outcome{revision: "r2", generations: gens, publishErr: errString("refused")})
	s.set("ns", outcome{revision: "r3", generations: gens, tooLarge: errString("too large")})
	s.set("ns", outcome{revision: "r4", generations: gens, tooLarge: errString("too large"), freezeRevision: "r5"})
	h := s.history.revisions("ns")
	for rev, want := range map[string]bool{"r1": true, "r2": false, "r3": false, "r4": false, "r5": true} {
		if got := h.contains(rev, "f", 1); got != want {
			t.Errorf("revision %s recorded: %v, want %v", rev, got, want)
		}
	}
	s.delete("ns")
	if len(s.history.revisions("ns").published) != 0 {
		t.Error("the history outlives the namespace's bundle")
	}
}

type errString string

func (e errString) Error() string { return string(e) }
