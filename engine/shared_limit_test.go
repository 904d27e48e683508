package engine

import (
	"strings"
	"testing"
	"time"
)

// sharedAnswers answers shared limits from a table and keeps what it was
// asked: the decision core's side of engine.SharedUsage, in miniature.
type sharedAnswers struct {
	used  float64
	asked []SharedQuery
}

func (a *sharedAnswers) Shared(q SharedQuery) float64 {
	a.asked = append(a.asked, q)
	return a.used
}

// TestSharedLimitsAskTheSharedUsage: a limit with store shared reads
// EvalOptions.Shared (named by its LimitID, with its key, window, max and
// what the call adds), a local one never does, and without a Shared the
// shared limit reads Usage as a local one.
func TestSharedLimitsAskTheSharedUsage(t *testing.T) {
	t.Parallel()
	shared := func(w When) *Compiled {
		c, diags := Compile(Bundle{Policies: []Policy{ordered("p", gwRule("r", "deny", withWhen(w))), catchAll()}})
		if len(diags) > 0 {
			t.Fatal(diags)
		}
		return c
	}
	req := gwRequest(t, `{"tool_name":"pay","agent_id":"Agent-1","session_id":"s1","tokens":40}`)
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

	rate := shared(When{RateLimit: &Limit{Max: 10, Window: "1m", Store: StoreShared, Per: PerNamespace, FailOpen: true}})
	if !rate.UsesSharedUsage() || !rate.UsesUsage() {
		t.Fatal("a shared rateLimit must report UsesSharedUsage and UsesUsage")
	}
	for _, tc := range []struct {
		used float64
		deny bool
	}{{9, false}, {10, true}} {
		a := &sharedAnswers{used: tc.used}
		res := rate.Evaluate(req, EvalOptions{Now: func() time.Time { return now }, Shared: a, Usage: &recordingUsage{}})
		if got := res.Decision == Deny; got != tc.deny {
			t.Errorf("used %v: deny=%v, want %v (%+v)", tc.used, got, tc.deny, res)
		}
		want := SharedQuery{Limit: "Policy/p/r/rateLimit", Key: UsageKey{Namespace: true}, Tool: "pay", Window: time.Minute, Max: 10, Add: 1, FailOpen: true}
		if len(a.asked) != 1 || a.asked[0] != want {
			t.Errorf("asked %+v, want [%+v]", a.asked, want)
		}
	}

	budget := shared(When{TokenBudget: &Limit{Max: 100, Window: "1h", Store: StoreShared, Per: PerSession}})
	a := &sharedAnswers{used: 61}
	if res := budget.Evaluate(req, EvalOptions{Now: func() time.Time { return now }, Shared: a}); res.Decision != Deny {
		t.Errorf("61 + 40 tokens over 100: want deny, got %+v", res)
	}
	want := SharedQuery{Limit: "Policy/p/r/tokenBudget", Key: UsageKey{Session: true, ID: "s1"}, Tokens: true, Window: time.Hour, Max: 100, Add: 40}
	if len(a.asked) != 1 || a.asked[0] != want {
		t.Errorf("asked %+v, want [%+v]", a.asked, want)
	}

	local := shared(When{RateLimit: &Limit{Max: 1, Window: "1m"}})
	if local.UsesSharedUsage() {
		t.Error("a local limit must not report UsesSharedUsage")
	}
	a = &sharedAnswers{used: 5}
	local.Evaluate(req, EvalOptions{Now: func() time.Time { return now }, Shared: a})
	if len(a.asked) != 0 {
		t.Errorf("a local limit asked the shared usage: %+v", a.asked)
	}

	u := &recordingUsage{}
	rate.Evaluate(req, EvalOptions{Now: func() time.Time { return now }, Usage: u})
	if len(u.asked) != 1 {
		t.Errorf("without Shared a shared limit must read Usage once, asked %v", u.asked)
	}
}

// TestSharedLimitFieldsAreChecked: store and failOpen are validated.
func TestSharedLimitFieldsAreChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		l    Limit
		want string
	}{
		{Limit{Max: 1, Window: "1m", Store: "redis"}, `store must be local or shared, not "redis"`},
		{Limit{Max: 1, Window: "1m", FailOpen: true}, "failOpen is only for store: shared"},
		{Limit{Max: 1, Window: "1m", Store: StoreLocal, FailOpen: true}, "failOpen is only for store: shared"},
		{Limit{Max: 1, Window: "1m", Per: "pod"}, `per must be agent, session or namespace, not "pod"`},
	} {
		_, diags := Compile(Bundle{Policies: []Policy{ordered("p", gwRule("r", "deny", withWhen(When{RateLimit: &tc.l})))}})
		if len(diags) != 1 || !strings.Contains(diags[0].Message, tc.want) {
			t.Errorf("%+v: diagnostics %v, want one saying %q", tc.l, diags, tc.want)
		}
	}
}
