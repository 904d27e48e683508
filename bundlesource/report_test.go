package bundlesource

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
)

// TestReportSaysWhatIsServedAndTellsEachChange: the report a sidecar's
// Lease carries follows the bundle served, the refusals since, and the
// freezes watched through the API, and OnReportChanged is told each time
// it changes (and not when a watch repeats what it said).
func TestReportSaysWhatIsServedAndTellsEachChange(t *testing.T) {
	key, err := bundle.GenerateSigningKey()
	must(t, err)
	keys, err := bundle.NewKeyring([]bundle.SigningKey{key})
	must(t, err)
	trust, err := bundle.ParseTrustedKeys(keys.PublicPEM())
	must(t, err)
	d, err := decide.NewInProcess(decide.Config{})
	must(t, err)
	told := 0
	l := New(Config{ConfigMap: "agents/toolgate-bundle", Trust: trust, Namespace: "agents", OnReportChanged: func() { told++ }},
		d, NewMetrics(prometheus.NewRegistry(), "t_"), nil)
	expectTold := func(what string, n int) {
		t.Helper()
		if told != n {
			t.Errorf("%s: OnReportChanged told %d times in all, want %d", what, told, n)
		}
	}
	if r := l.Report(); r.Revision != "" || r.Frozen != nil || r.Rejected != nil {
		t.Errorf("before any bundle: %+v", r)
	}

	encode := func(policy string) ([]byte, string) {
		doc, rev, err := engine.Encode(engine.Bundle{SchemaVersion: 1, Policies: []engine.Policy{{ID: policy, Version: 1, DefaultEffect: "allow"}}})
		must(t, err)
		return doc, rev
	}
	doc1, rev1 := encode("first")
	must(t, l.LoadSigned(doc1, false, keys.Seal("agents", rev1, nil, time.Now()), OriginConfigMap))
	expectTold("a bundle loaded", 1)
	if r := l.Report(); r.Revision != rev1 || r.Rejected != nil {
		t.Errorf("serving %s: %+v", rev1, r)
	}

	// Refused unsigned: named by its revision, while rev1 keeps serving.
	doc2, rev2 := encode("second")
	if err := l.Load(doc2, false, OriginConfigMap); err == nil {
		t.Fatal("an unsigned bundle loaded")
	}
	expectTold("a bundle refused", 2)
	sr := l.Report().SidecarReport("v9")
	if sr.Revision != rev1 || sr.RefusedRevision != rev2 || !strings.HasPrefix(sr.RefusedReason, ReasonUnsigned+": ") || sr.Version != "v9" {
		t.Errorf("after refusing %s: %+v", rev2, sr)
	}
	// Too corrupt to name a revision: refused with none.
	if err := l.Load([]byte("{"), false, OriginConfigMap); err == nil {
		t.Fatal("a corrupt bundle loaded")
	}
	if r := l.Report(); r.Rejected == nil || r.Rejected.Revision != "" || r.Revision != rev1 {
		t.Errorf("after a corrupt bundle: %+v", r)
	}
	expectTold("a corrupt bundle refused", 3)
	// rev1 again (a resync) clears the refusal.
	must(t, l.LoadSigned(doc1, false, keys.Seal("agents", rev1, nil, time.Now()), OriginConfigMap))
	expectTold("the refusal cleared", 4)
	if sr := l.Report().SidecarReport("v9"); sr.RefusedReason != "" || sr.Revision != rev1 {
		t.Errorf("after the served bundle again: %+v", sr)
	}

	// The freezes watched through the API, by name, sorted.
	l.setNamespaceFreezes([]engine.FrozenAgent{{ID: "bot"}}, []string{v1alpha1.FreezeName("FrozenAgent", "stop-bot")})
	expectTold("a FrozenAgent", 5)
	l.setNamespaceFreezes([]engine.FrozenAgent{{ID: "bot"}}, []string{v1alpha1.FreezeName("FrozenAgent", "stop-bot")})
	expectTold("the same FrozenAgent again", 5)
	cf := &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "incident"},
		Spec: v1alpha1.ClusterFrozenAgentSpec{FrozenAgentSpec: v1alpha1.FrozenAgentSpec{AgentID: "all-bots"}}}
	l.setClusterFreezes([]*v1alpha1.ClusterFrozenAgent{cf})
	want := []string{"ClusterFrozenAgent/incident", "FrozenAgent/stop-bot"}
	if r := l.Report(); !slices.Equal(r.Frozen, want) {
		t.Errorf("frozen %v, want %v", r.Frozen, want)
	}
	// Renamed, same content: the engine's freezes are equal, the names not.
	renamed := cf.DeepCopy()
	renamed.Name = "incident-2"
	before := told
	l.setClusterFreezes([]*v1alpha1.ClusterFrozenAgent{renamed})
	if told == before || !slices.Contains(l.Report().Frozen, "ClusterFrozenAgent/incident-2") {
		t.Errorf("a renamed ClusterFrozenAgent: told %d -> %d, frozen %v", before, told, l.Report().Frozen)
	}
	// A cluster freeze whose selector does not choose the namespace is not
	// applied, nor named.
	l.mu.Lock()
	l.nsLabels = map[string]string{"team": "search"}
	l.mu.Unlock()
	other := cf.DeepCopy()
	other.Name, other.Spec.NamespaceSelector = "payments-only", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}
	l.setClusterFreezes([]*v1alpha1.ClusterFrozenAgent{other})
	if r := l.Report(); !slices.Equal(r.Frozen, []string{"FrozenAgent/stop-bot"}) {
		t.Errorf("with a ClusterFrozenAgent selecting another team: frozen %v", r.Frozen)
	}
}
