package usage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// limited compiles a bundle that allows everything but pay past 10 calls
// an hour per agent, and Bash past 2 an hour per session.
func limited(t testing.TB, window string) *engine.Compiled {
	t.Helper()
	c, diags := engine.Compile(engine.Bundle{Policies: []engine.Policy{{ID: "limits", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "pay-hourly", Effect: "deny", Targets: &engine.Targets{Tools: []string{"pay"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: 10, Window: window, Per: engine.PerAgent}}},
		{ID: "bash-twice", Effect: "deny", Targets: &engine.Targets{Tools: []string{"Bash"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: 2, Window: window, Per: engine.PerSession}}},
	}}}})
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	return c
}

// decideAt decides req at now, as the sidecar does.
func decideAt(l *Ledger, c *engine.Compiled, req engine.Request, now time.Time) (engine.Result, error) {
	return l.Decide(c, req, engine.EvalOptions{Now: func() time.Time { return now }})
}

// TestAttackFreshSessionsDoNotEvictTheAgentsLimit is issue 24 §3's
// eviction attack on the ledger: the agent spends its pay limit, then
// makes 1,100 allowed calls with fresh session ids (its own choice) to
// push its pay counter out of the ledger, then pays again. The agent's
// counter holds while its window is open; the flood costs the agent only
// its own older session counters.
func TestAttackFreshSessionsDoNotEvictTheAgentsLimit(t *testing.T) {
	l := newLedger(t, DefaultMaxKeys, DefaultMaxEventsPerKey)
	c := limited(t, "1h")
	now := t0
	for i := range 10 {
		if res, err := decideAt(l, c, call("shop", "s-0", "pay", 0), now); res.Decision != engine.Allow || err != nil {
			t.Fatalf("pay %d: %+v %v", i+1, res, err)
		}
	}
	for i := range 1100 {
		now = now.Add(time.Millisecond)
		if res, err := decideAt(l, c, call("shop", fmt.Sprintf("fresh-%d", i), "Read", 0), now); res.Decision != engine.Allow || err != nil {
			t.Fatalf("Read in fresh session %d: %+v %v", i, res, err)
		}
	}
	res, err := decideAt(l, c, call("shop", "s-new", "pay", 0), now)
	if err != nil || res.Decision != engine.Deny || res.MatchedRuleID != "pay-hourly" {
		t.Fatalf("pay after the flood: %+v %v, want deny by pay-hourly", res, err)
	}
	if got := l.Calls(agentKey("shop"), "pay", time.Hour, now); got != 10 {
		t.Errorf("the agent's pay counter holds %d calls, want 10", got)
	}
	checkOwners(t, l)
	if sessions := l.agents[l.hash("shop")].n; sessions > DefaultMaxKeys/2 {
		t.Errorf("the agent holds %d session counters, more than its share of %d", sessions, DefaultMaxKeys/2)
	}
}

// TestSessionCountersAreBoundedPerAgent: one agent's flood of sessions
// forgets its own session counters only; another agent's session keeps its
// count, and so its per-session limit.
func TestSessionCountersAreBoundedPerAgent(t *testing.T) {
	l := newLedger(t, 64, 16)
	c := limited(t, "1h")
	now := t0
	for range 2 {
		if res, err := decideAt(l, c, call("quiet", "q-1", "Bash", 0), now); res.Decision != engine.Allow || err != nil {
			t.Fatalf("quiet's Bash: %+v %v", res, err)
		}
	}
	for i := range 500 {
		now = now.Add(time.Millisecond)
		if res, err := decideAt(l, c, call("noisy", fmt.Sprint("n-", i), "Read", 0), now); res.Decision != engine.Allow || err != nil {
			t.Fatalf("noisy's Read %d: %+v %v", i, res, err)
		}
	}
	checkOwners(t, l)
	if n := l.agents[l.hash("noisy")].n; n != 32 {
		t.Errorf("noisy holds %d session counters, want its share, 32", n)
	}
	if res, err := decideAt(l, c, call("quiet", "q-1", "Bash", 0), now); res.MatchedRuleID != "bash-twice" || err != nil {
		t.Errorf("quiet's third Bash in its session after noisy's flood: %+v %v, want deny by bash-twice", res, err)
	}
}

// TestAFullLedgerDeniesWhatItCannotCount: when every counter holds calls
// a limit's window reaches, a call that needs a new counter is not
// allowed uncounted: it is ErrUnavailable, and counts nothing. Once the
// window has passed, stale counters make room again.
func TestAFullLedgerDeniesWhatItCannotCount(t *testing.T) {
	l := newLedger(t, 8, 16)
	c := limited(t, "1h")
	now := t0
	for range 3 {
		if res, err := decideAt(l, c, call("shop", "s", "pay", 0), now); res.Decision != engine.Allow || err != nil {
			t.Fatalf("pay: %+v %v", res, err)
		}
	}
	// Each new tool needs an agent counter; session counters make room
	// until only agent counters in their window are left.
	var err error
	tool := ""
	for i := 1; i <= 8 && err == nil; i++ {
		now = now.Add(time.Second)
		tool = fmt.Sprint("t", i)
		_, err = decideAt(l, c, call("shop", "s", tool, 0), now)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("eight new tools in a ledger of 8 counters: %v, want ErrUnavailable", err)
	}
	t.Logf("%s denied: %v", tool, err)
	if got := l.Calls(agentKey("shop"), tool, time.Hour, now); got != 0 {
		t.Errorf("the call denied was counted: %d", got)
	}
	if got := l.Calls(agentKey("shop"), "pay", time.Hour, now); got != 3 {
		t.Errorf("the agent's pay counter holds %d calls, want 3", got)
	}
	if l.Keys() != 8 {
		t.Errorf("%d counters, want 8", l.Keys())
	}
	now = now.Add(time.Hour)
	if res, err := decideAt(l, c, call("shop", "s", tool, 0), now); res.Decision != engine.Allow || err != nil {
		t.Errorf("an hour later, with stale counters to forget: %+v %v", res, err)
	}
}

// TestAForgottenSessionIsNotCountedFromZero: a session's counter forgotten
// for its agent's share, then used again, may lack calls in the window: a
// per-session limit reading it is ErrUnavailable until the window has
// passed, never a fresh count.
func TestAForgottenSessionIsNotCountedFromZero(t *testing.T) {
	l := newLedger(t, 16, 16)
	c := limited(t, "1h")
	now := t0
	for range 2 {
		if res, err := decideAt(l, c, call("shop", "victim", "Bash", 0), now); res.Decision != engine.Allow || err != nil {
			t.Fatalf("Bash: %+v %v", res, err)
		}
	}
	for i := range 20 {
		now = now.Add(time.Second)
		if _, err := decideAt(l, c, call("shop", fmt.Sprint("s-", i), "Read", 0), now); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := l.series[seriesKey{session: true, id: l.hash("victim"), tool: l.hash("Bash")}]; ok {
		t.Fatal("the flood did not push the session's counter out; the test shows nothing")
	}
	res, err := decideAt(l, c, call("shop", "victim", "Bash", 0), now)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Bash in the forgotten session: %+v %v, want ErrUnavailable", res, err)
	}
	if res, err := decideAt(l, c, call("shop", "victim", "Bash", 0), t0.Add(time.Hour+time.Minute)); res.Decision != engine.Allow || err != nil {
		t.Errorf("once the window has passed: %+v %v, want allow", res, err)
	}
	// Agent limits are untouched by the session flood.
	if res, err := decideAt(l, c, call("shop", "x", "pay", 0), now); res.Decision != engine.Allow || err != nil {
		t.Errorf("pay: %+v %v", res, err)
	}
}

// TestALongerWindowDoesNotReadAForgottenCounterAsZero: a counter forgotten
// as stale for the bundle of the time may hold calls a later bundle's
// longer window reaches; reading it absent is ErrUnavailable, not zero.
func TestALongerWindowDoesNotReadAForgottenCounterAsZero(t *testing.T) {
	l := newLedger(t, 4, 16)
	minute, day := limited(t, "1m"), limited(t, "24h")
	for i := range 10 {
		if _, err := decideAt(l, minute, call("a", "", "pay", 0), t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(time.Hour)
	// Other agents' calls make the stale pay counter go.
	for _, agent := range []string{"b", "c"} {
		if _, err := decideAt(l, minute, call(agent, "", "Read", 0), now); err != nil {
			t.Fatal(err)
		}
	}
	if l.Evictions() != 0 {
		t.Errorf("%d evictions of counters stale for a one-minute window", l.Evictions())
	}
	if res, err := decideAt(l, day, call("a", "", "pay", 0), now); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("pay under a day's limit, its counter forgotten an hour in: %+v %v, want ErrUnavailable", res, err)
	}
}

// checkOwners fails t unless every session counter's agent is the one the
// ledger bounds (l.agents), counting it, in its list: an owner left behind
// would let its agent's sessions past their share.
func checkOwners(t *testing.T, l *Ledger) {
	t.Helper()
	held := map[*owner]int{}
	for _, s := range l.series {
		if !s.key.session {
			continue
		}
		if s.owner == nil || l.agents[s.owner.hash] != s.owner {
			t.Fatalf("session counter %q of agent %q has an owner the ledger does not bound", s.id, s.owner.name)
		}
		held[s.owner]++
	}
	for _, o := range l.agents {
		listed := 0
		for s := o.head; s != nil; s = s.onext {
			listed++
		}
		if o.n != held[o] || listed != o.n {
			t.Fatalf("agent %q: counts %d session counters, lists %d, holds %d", o.name, o.n, listed, held[o])
		}
	}
}

// TestAnAgentWhoseSessionsAreAllForgottenStaysBounded: making room may
// forget every session counter of the calling agent, and the counter then
// made is still its own, within its share.
func TestAnAgentWhoseSessionsAreAllForgottenStaysBounded(t *testing.T) {
	l := newLedger(t, 4, 16)
	c := limited(t, "1h")
	now := t0
	for i, tc := range []struct{ session, tool string }{{"s1", "t1"}, {"s1", "t2"}, {"s2", "t3"}, {"s3", "t3"}, {"s4", "t3"}} {
		now = now.Add(time.Second)
		if _, err := decideAt(l, c, call("a", tc.session, tc.tool, 0), now); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		checkOwners(t, l)
	}
	if n := l.agents[l.hash("a")].n; n > 2 {
		t.Errorf("the agent holds %d session counters, past its share of 2", n)
	}
}

// TestNoCountIsEverSilentlyLow replays random calls (few agents, many
// sessions and tools) into small ledgers and checks every count against an
// exact one (odd rounds count the namespace too, which is always whole and
// never low): a count the ledger vouches for is never below the truth (an
// agent's never unvouched while its window is open), session counters stay
// within their agent's share, and the cap holds.
func TestNoCountIsEverSilentlyLow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const window = time.Hour
	for round := range 40 {
		maxKeys := 4 + rng.IntN(28)
		namespace := round%2 == 1 // odd rounds count the namespace too
		l := newLedger(t, maxKeys, 4+rng.IntN(8))
		type rec struct {
			at                   time.Time
			agent, session, tool string
		}
		var exact []rec
		now := t0
		pick := func(prefix string, n int) string { return fmt.Sprint(prefix, rng.IntN(n)) }
		for step := range 300 {
			now = now.Add(time.Duration(rng.IntN(120)) * time.Second)
			r := rec{now, pick("a", 3), pick("s", 40), pick("t", 6)}
			if l.record(keysOf(call(r.agent, r.session, r.tool, 0), namespace), nanos(now), window) == nil {
				exact = append(exact, r)
			}
			checkOwners(t, l)
			if l.Keys() > maxKeys {
				t.Fatalf("round %d step %d: %d counters past the cap of %d", round, step, l.Keys(), maxKeys)
			}
			for _, o := range l.agents {
				if o.n > maxKeys/2 {
					t.Fatalf("round %d step %d: agent %s holds %d session counters, past its share", round, step, o.name, o.n)
				}
			}
			agent, session, tool := pick("a", 3), pick("s", 40), pick("t", 6)
			var forAgent, forSession, forNamespace int64
			for _, r := range exact {
				if r.at.After(now.Add(-window)) && r.tool == tool {
					forNamespace++
					if r.agent == agent {
						forAgent++
					}
					if r.session == session {
						forSession++
					}
				}
			}
			if n, whole := l.calls(agentKey(agent), tool, window, now); !whole || n < forAgent {
				t.Fatalf("round %d step %d: agent %s, %s: %d calls (whole %v), really %d", round, step, agent, tool, n, whole, forAgent)
			}
			if n, whole := l.calls(engine.UsageKey{Namespace: true}, tool, window, now); namespace && (!whole || n < forNamespace) {
				t.Fatalf("round %d step %d: the namespace, %s: %d calls (whole %v), really %d", round, step, tool, n, whole, forNamespace)
			}
			if n, whole := l.calls(sessionKey(session), tool, window, now); whole && n < forSession {
				t.Fatalf("round %d step %d: session %s, %s: %d calls vouched for, really %d", round, step, session, tool, n, forSession)
			}
		}
	}
}
