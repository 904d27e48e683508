package usage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

var namespaceKey = engine.UsageKey{Namespace: true}

// perNamespace compiles a bundle that allows everything but pay past 5
// calls an hour, and tokens past 100 an hour, for the whole namespace.
func perNamespace(t testing.TB) *engine.Compiled {
	t.Helper()
	c, diags := engine.Compile(engine.Bundle{Policies: []engine.Policy{{ID: "limits", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "pay-namespace", Effect: "deny", Targets: &engine.Targets{Tools: []string{"pay"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: 5, Window: "1h", Per: engine.PerNamespace}}},
		{ID: "tokens-namespace", Effect: "deny",
			When: &engine.When{TokenBudget: &engine.Limit{Max: 100, Window: "1h", Per: engine.PerNamespace}}},
	}}}})
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if !c.UsesNamespaceUsage() {
		t.Fatal("a per: namespace limit must report UsesNamespaceUsage")
	}
	return c
}

// TestANamespaceLimitCountsEveryAgent: five agents (and a call with no
// agent id) share one count; the sixth pay is denied whoever makes it,
// and the namespace's tokens are summed over every agent.
func TestANamespaceLimitCountsEveryAgent(t *testing.T) {
	l := newLedger(t, DefaultMaxKeys, DefaultMaxEventsPerKey)
	c := perNamespace(t)
	now := t0
	for i := range 5 {
		now = now.Add(time.Second)
		agent := fmt.Sprint("agent-", i)
		if i == 4 {
			agent = "" // missing identity escapes no limit
		}
		if res, err := decideAt(l, c, call(agent, fmt.Sprint("s-", i), "pay", 10), now); res.Decision != engine.Allow || err != nil {
			t.Fatalf("pay %d by %q: %+v %v", i+1, agent, res, err)
		}
	}
	res, err := decideAt(l, c, call("agent-new", "s-new", "pay", 0), now)
	if err != nil || res.MatchedRuleID != "pay-namespace" {
		t.Fatalf("a sixth pay by a new agent: %+v %v, want deny by pay-namespace", res, err)
	}
	if got := l.Calls(namespaceKey, "pay", time.Hour, now); got != 5 {
		t.Errorf("the namespace's pay counter holds %d calls, want 5", got)
	}
	// The namespace's key is no agent's: an agent with no id, or one named
	// like nothing, reads its own counter.
	if got := l.Calls(agentKey(""), "pay", time.Hour, now); got != 1 {
		t.Errorf("the agent without an id: %d pay calls, want 1", got)
	}
	if got := l.Calls(engine.UsageKey{Namespace: true, ID: "agent-1"}, "pay", time.Hour, now); got != 5 {
		t.Errorf("a namespace key with an id: %d calls, want the namespace's 5", got)
	}
	if got := l.Tokens(namespaceKey, time.Hour, now); got != 50 {
		t.Errorf("the namespace's tokens: %v, want 50", got)
	}
	res, err = decideAt(l, c, call("agent-9", "s-9", "Read", 51), now)
	if err != nil || res.MatchedRuleID != "tokens-namespace" {
		t.Errorf("51 tokens over the namespace's 50 of 100: %+v %v, want deny by tokens-namespace", res, err)
	}
}

// TestOnlyANamespaceLimitCountsTheNamespace: a bundle without a per:
// namespace limit makes no namespace counter (two counters per call fewer
// on the decision path); Record, which replays histories, always counts
// it.
func TestOnlyANamespaceLimitCountsTheNamespace(t *testing.T) {
	l := newLedger(t, DefaultMaxKeys, DefaultMaxEventsPerKey)
	if _, err := decideAt(l, limited(t, "1h"), call("a", "s", "pay", 3), t0); err != nil {
		t.Fatal(err)
	}
	if l.Keys() != 4 || l.Calls(namespaceKey, "pay", time.Hour, t0) != 0 {
		t.Errorf("an agent limit: %d counters, namespace count %d; want 4 and 0", l.Keys(), l.Calls(namespaceKey, "pay", time.Hour, t0))
	}
	if _, err := decideAt(l, perNamespace(t), call("a", "s", "pay", 3), t0); err != nil {
		t.Fatal(err)
	}
	if l.Keys() != 6 || l.Calls(namespaceKey, "pay", time.Hour, t0) != 1 {
		t.Errorf("a namespace limit: %d counters, namespace count %d; want 6 and 1", l.Keys(), l.Calls(namespaceKey, "pay", time.Hour, t0))
	}
	must(t, l.Record(call("b", "", "pay", 0), t0))
	if got := l.Calls(namespaceKey, "pay", time.Hour, t0); got != 2 {
		t.Errorf("after Record: the namespace holds %d pay calls, want 2", got)
	}
}

// TestAttackFreshSessionsDoNotEvictTheNamespaceCount is the eviction
// attack of TestAttackFreshSessionsDoNotEvictTheAgentsLimit on a
// namespace's count: the namespace counter is kept as an agent's is.
func TestAttackFreshSessionsDoNotEvictTheNamespaceCount(t *testing.T) {
	l := newLedger(t, 64, 16)
	c := perNamespace(t)
	now := t0
	for i := range 5 {
		if res, err := decideAt(l, c, call(fmt.Sprint("a-", i), "s", "pay", 0), now); res.Decision != engine.Allow || err != nil {
			t.Fatalf("pay %d: %+v %v", i+1, res, err)
		}
	}
	for i := range 500 {
		now = now.Add(time.Millisecond)
		if res, err := decideAt(l, c, call("flood", fmt.Sprint("fresh-", i), "Read", 0), now); res.Decision != engine.Allow || err != nil {
			t.Fatalf("Read in fresh session %d: %+v %v", i, res, err)
		}
	}
	checkOwners(t, l)
	if res, err := decideAt(l, c, call("flood", "s-new", "pay", 0), now); err != nil || res.MatchedRuleID != "pay-namespace" {
		t.Fatalf("pay after the flood: %+v %v, want deny by pay-namespace", res, err)
	}
	if got := l.Calls(namespaceKey, "pay", time.Hour, now); got != 5 {
		t.Errorf("the namespace's pay counter holds %d calls, want 5", got)
	}
}

// TestStateKeepsTheNamespaceCount: the namespace's counters survive a
// restart, from calls appended and from a snapshot.
func TestStateKeepsTheNamespaceCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage")
	c := perNamespace(t)
	first, _ := openState(t, path, 64, t0)
	now := t0
	for i := range 5 {
		now = now.Add(time.Second)
		if _, err := decideAt(first, c, call(fmt.Sprint("a-", i), "s", "pay", 7), now); err != nil {
			t.Fatal(err)
		}
	}
	second, load := openState(t, path, 64, now)
	if load.Unreadable != nil || load.Calls != 5 {
		t.Fatalf("reopened: %+v, want 5 calls appended", load)
	}
	third, load := openState(t, path, 64, now)
	if load.Unreadable != nil || load.Counters != second.Keys() {
		t.Fatalf("from the snapshot: %+v, want %d counters", load, second.Keys())
	}
	for name, l := range map[string]*Ledger{"appended": second, "snapshot": third} {
		if got := l.Calls(namespaceKey, "pay", time.Hour, now); got != 5 {
			t.Errorf("%s: the namespace holds %d pay calls, want 5", name, got)
		}
		if got := l.Tokens(namespaceKey, time.Hour, now); got != 35 {
			t.Errorf("%s: the namespace holds %v tokens, want 35", name, got)
		}
		if res, err := decideAt(l, c, call("a-new", "s", "pay", 0), now); err != nil || res.MatchedRuleID != "pay-namespace" {
			t.Errorf("%s: pay after the restart: %+v %v, want deny by pay-namespace", name, res, err)
		}
	}
}

// TestMalformedNamespaceStateIsRefused: a call record with a namespace
// byte other than 1, or a namespace counter that is also a session's or
// names an agent, makes the file unreadable (which fails closed), never a
// ledger that reads a namespace's count from someone else's.
func TestMalformedNamespaceStateIsRefused(t *testing.T) {
	l := newLedger(t, 64, 16)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"a call with namespace byte 2", callFile(l, 2), "a call counted for no known key"},
		{"a call with two trailing bytes", callFile(l, 1, 1), "longer than its content"},
		{"a namespace counter of a session", counterFile(l, 4|1, "", "pay", "a"), "a counter of no kind"},
		{"a namespace counter naming an agent", counterFile(l, 4, "a", "pay", ""), "a counter of no kind"},
		{"flags past the known ones", counterFile(l, 8, "a", "pay", ""), "a counter of no kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "usage")
			must(t, os.WriteFile(path, tc.data, 0o600))
			_, load := openState(t, path, 64, t0)
			if load.Unreadable == nil || !strings.Contains(load.Unreadable.Error(), tc.want) {
				t.Fatalf("load %+v, want unreadable (%s)", load, tc.want)
			}
		})
	}
}

// lostRecord is an empty ledger's 'L' record.
func lostRecord(l *Ledger) []byte { return l.snapshot()[len(stateMagic):] }

// callFile is a state file of one 'R' record for a call counted for the
// namespace, whose namespace byte and any after it are trailing.
func callFile(l *Ledger, trailing ...byte) []byte {
	payload := appendCall(nil, callKeys{agent: "a", tool: "pay", namespace: true}, 1, time.Hour)[8:]
	payload = append(payload[:len(payload)-1], trailing...)
	out := append([]byte(stateMagic), lostRecord(l)...)
	return appendRecord(out, func(p []byte) []byte { return append(p, payload...) })
}

// counterFile is a state file of one 'C' record with these flags and names
// and one event.
func counterFile(l *Ledger, flags byte, id, tool, ownerName string) []byte {
	out := append([]byte(stateMagic), lostRecord(l)...)
	return appendRecord(out, func(p []byte) []byte {
		p = append(p, 'C', flags)
		p = appendName(p, id)
		p = appendName(p, tool)
		p = appendName(p, ownerName)
		p = append(p, make([]byte, 16)...) // gapUntil 0, base 0
		p = append(p, 1, 0, 0, 0)          // one event
		p = append(p, 1, 0, 0, 0, 0, 0, 0, 0)
		return append(p, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f) // cum 1.0
	})
}
