package engine

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func saBundle() Bundle {
	return Bundle{Revision: "r1", Policies: []Policy{{ID: "p", DefaultEffect: "allow", Rules: []Rule{{ID: "r", Effect: "deny",
		Conditions: []Condition{{Field: "tool_name", Operator: "eq", Value: json.RawMessage(`"Nope"`)}}}}}}}
}

// A freeze naming a service account denies whatever agent_id the request
// carries, but only when the caller says it runs as that service account:
// the request cannot name it.
func TestFreezeByServiceAccount(t *testing.T) {
	t.Parallel()
	b := saBundle()
	b.FrozenAgents = []FrozenAgent{{ServiceAccount: "billing-bot", Reason: "INC-7"}}
	c, _ := Compile(b)
	for _, tc := range []struct {
		sa, agent string
		frozen    bool
	}{
		{"billing-bot", "anything", true},
		{"billing-bot", "", true},
		{"other", "billing-bot", false}, // agent ids are not service accounts
		{"", "billing-bot", false},
		{"Billing-Bot", "x", false}, // names are exact, as the API server's
	} {
		res := c.Evaluate(Request{"tool_name": "Bash", "agent_id": tc.agent, "serviceAccount": "billing-bot"},
			EvalOptions{ServiceAccount: tc.sa})
		if got := res.Code == CodeAgentFrozen; got != tc.frozen {
			t.Errorf("sa %q agent %q: %+v, want frozen=%v", tc.sa, tc.agent, res, tc.frozen)
		} else if b.FrozenAgents[0].FreezesServiceAccount(tc.sa) != got {
			// toolgate unfreeze --service-account finds freezes with it.
			t.Errorf("FreezesServiceAccount(%q) disagrees with evaluation (frozen=%v)", tc.sa, got)
		} else if got && res.Reason != "INC-7" {
			t.Errorf("reason %q", res.Reason)
		}
	}
	// Default reasons name what was frozen.
	b.FrozenAgents = []FrozenAgent{{ServiceAccount: "sa-1"}, {ID: "a-2", ServiceAccount: "sa-2"}}
	c, _ = Compile(b)
	if r := c.Evaluate(Request{}, EvalOptions{ServiceAccount: "sa-1"}); r.Reason != `service account "sa-1" is frozen` {
		t.Errorf("reason %q", r.Reason)
	}
	// Both named: either one matching freezes.
	if r := c.Evaluate(Request{"agent_id": "A-2"}, EvalOptions{}); r.Code != CodeAgentFrozen {
		t.Errorf("by agent id: %+v", r)
	}
	if r := c.Evaluate(Request{"agent_id": "x"}, EvalOptions{ServiceAccount: "sa-2"}); r.Code != CodeAgentFrozen {
		t.Errorf("by service account: %+v", r)
	}
}

// A bundle without service-account freezes encodes as it did before the
// field existed: same bytes, same revision.
func TestServiceAccountLeavesOldBundlesUnchanged(t *testing.T) {
	t.Parallel()
	doc, _, err := Encode(Bundle{FrozenAgents: []FrozenAgent{{ID: "a", Reason: "r"}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), "serviceAccount") {
		t.Errorf("document names serviceAccount: %s", doc)
	}
	const want = `{"schemaVersion":1,"revision":"sha256:`
	if !strings.HasPrefix(string(doc), want) || !strings.HasSuffix(string(doc), `"policies":[],"frozenAgents":[{"id":"a","reason":"r"}]}`) {
		t.Errorf("document %s", doc)
	}
	b, err := Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	withSA := b
	withSA.FrozenAgents = []FrozenAgent{{ID: "a", ServiceAccount: "s", Reason: "r"}}
	_, rev2, _ := Encode(withSA)
	if rev2 == b.Revision {
		t.Error("a service account does not change the revision")
	}
}

// WithFrozen adds freezes to a compiled bundle without recompiling its
// policies; the original is untouched, expiry reads the evaluation's clock.
func TestWithFrozen(t *testing.T) {
	t.Parallel()
	b := saBundle()
	b.FrozenAgents = []FrozenAgent{{ID: "from-bundle"}}
	c, _ := Compile(b)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	end := at.Add(time.Minute)
	m := c.WithFrozen([]FrozenAgent{{ID: "from-api", ExpiresAt: &end}, {ServiceAccount: "sa"}})
	now := func() time.Time { return at }
	later := func() time.Time { return end }
	for _, tc := range []struct {
		c      *Compiled
		agent  string
		sa     string
		clock  func() time.Time
		frozen bool
	}{
		{m, "from-bundle", "", now, true},
		{m, "FROM-API", "", now, true},
		{m, "from-api", "", later, false},
		{m, "x", "sa", now, true},
		{m, "x", "", now, false},
		{c, "from-api", "sa", now, false},
		{c, "from-bundle", "", now, true},
	} {
		r := tc.c.Evaluate(Request{"tool_name": "Bash", "agent_id": tc.agent}, EvalOptions{Now: tc.clock, ServiceAccount: tc.sa})
		if got := r.Code == CodeAgentFrozen; got != tc.frozen {
			t.Errorf("%q/%q: %+v, want frozen=%v", tc.agent, tc.sa, r, tc.frozen)
		}
	}
	if m.Revision() != c.Revision() {
		t.Errorf("revision %q", m.Revision())
	}
	if (*Compiled)(nil).WithFrozen([]FrozenAgent{{ID: "a"}}) != nil {
		t.Error("nil WithFrozen is not nil")
	}
}

// The freeze checks on the decision path allocate nothing, by agent id or
// by service account, found or not. (frozenFor, not Evaluate: the scan's
// scratch comes from a sync.Pool, which the race detector empties on
// purpose, so only the pool-free check is measured here; the benchmarks
// report Evaluate's allocations.)
func TestFrozenCheckAllocs(t *testing.T) {
	c, _ := Compile(saBundle())
	c = c.WithFrozen([]FrozenAgent{{ID: "other"}, {ServiceAccount: "frozen-sa"}})
	now := time.Now()
	for _, tc := range []struct {
		agent, sa string
		frozen    bool
	}{{"agent-1", "ok-sa", false}, {"agent-1", "frozen-sa", true}, {"OTHER", "", true}, {"agent-1", "", false}} {
		req := Request{"tool_name": "Bash", "agent_id": tc.agent}
		if got := c.frozenFor(req, tc.sa, now) != nil; got != tc.frozen {
			t.Errorf("%s/%s: frozen %v, want %v", tc.agent, tc.sa, got, tc.frozen)
		}
		if n := testing.AllocsPerRun(200, func() { _ = c.frozenFor(req, tc.sa, now) }); n != 0 {
			t.Errorf("%s/%s: %v allocations per freeze check", tc.agent, tc.sa, n)
		}
	}
}

func TestNextFreezeExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	c, err := Compile(Bundle{FrozenAgents: []FrozenAgent{
		{ID: "forever"},
		{ID: "past", ExpiresAt: at(-time.Minute)},
		{ID: "later", ExpiresAt: at(time.Hour)},
		{ServiceAccount: "ns/sa", ExpiresAt: at(30 * time.Minute)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c.NextFreezeExpiry(now); !ok || !got.Equal(*at(30 * time.Minute)) {
		t.Fatalf("next expiry = %v %v; want the service account's, in 30m", got, ok)
	}
	// Freezes merged from the API count too, and one expiring exactly now
	// is already over.
	merged := c.WithFrozen([]FrozenAgent{{ID: "api", ExpiresAt: at(time.Minute)}, {ID: "now", ExpiresAt: at(0)}})
	if got, ok := merged.NextFreezeExpiry(now); !ok || !got.Equal(*at(time.Minute)) {
		t.Fatalf("with the API's freezes: %v %v; want in 1m", got, ok)
	}
	if got, ok := c.NextFreezeExpiry(now.Add(2 * time.Hour)); ok {
		t.Fatalf("after every expiry: %v; want none", got)
	}
	none, err := Compile(Bundle{FrozenAgents: []FrozenAgent{{ID: "forever"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := none.NextFreezeExpiry(now); ok {
		t.Fatalf("only a freeze without expiry: %v; want none", got)
	}
}
