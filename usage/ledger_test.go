package usage

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

var t0 = time.Date(2030, 1, 31, 12, 0, 0, 0, time.UTC)

func newLedger(t testing.TB, maxKeys, maxEvents int) *Ledger {
	t.Helper()
	l, err := New(maxKeys, maxEvents)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func call(agent, session, tool string, tokens float64) engine.Request {
	req := engine.Request{"tool_name": tool}
	if agent != "" {
		req["agent_id"] = agent
	}
	if session != "" {
		req["session_id"] = session
	}
	if tokens != 0 {
		req["tokens"] = tokens
	}
	return req
}

func agentKey(id string) engine.UsageKey {
	k, _ := engine.UsageKeys(engine.Request{"agent_id": id})
	return k
}

func sessionKey(id string) engine.UsageKey {
	_, k := engine.UsageKeys(engine.Request{"session_id": id})
	return k
}

func TestWindowsAreTrailingAndHalfOpen(t *testing.T) {
	l := newLedger(t, 100, 100)
	must(t, l.Record(call("a", "", "pay", 5), t0))
	a := agentKey("a")
	for _, tc := range []struct {
		name   string
		window time.Duration
		now    time.Time
		want   int64
	}{
		{"recorded at now: included", time.Hour, t0, 1},
		{"exactly at now-window: excluded", time.Hour, t0.Add(time.Hour), 0},
		{"a nanosecond inside the window", time.Hour, t0.Add(time.Hour - 1), 1},
		{"after now: excluded", time.Hour, t0.Add(-1), 0},
		{"a zero window holds nothing", 0, t0, 0},
		{"a negative window holds nothing", -time.Hour, t0, 0},
	} {
		if got := l.Calls(a, "pay", tc.window, tc.now); got != tc.want {
			t.Errorf("%s: Calls = %d, want %d", tc.name, got, tc.want)
		}
		if got, want := l.Tokens(a, tc.window, tc.now), 5*float64(tc.want); got != want {
			t.Errorf("%s: Tokens = %v, want %v", tc.name, got, want)
		}
	}
}

func TestCallsArePerToolAndTokensAcrossTools(t *testing.T) {
	l := newLedger(t, 100, 100)
	for i, c := range []engine.Request{
		call("bot", "s1", "pay", 100),
		call("bot", "s1", "pay", 0),
		call("Bot", "s2", "Read", 50.5),                           // agent ids fold as FrozenAgents compare
		{"tool_name": "pay", "agent_id": "bot", "tokens": -7.0},   // negative: 0 tokens
		{"tool_name": "pay", "agent_id": "bot", "tokens": "many"}, // not a number: 0 tokens
	} {
		must(t, l.Record(c, t0.Add(time.Duration(i)*time.Second)))
	}
	now, w := t0.Add(time.Minute), time.Hour
	for _, tc := range []struct {
		key   engine.UsageKey
		tool  string
		calls int64
	}{
		{agentKey("bot"), "pay", 4}, {agentKey("BOT"), "pay", 4}, {agentKey("bot"), "Read", 1},
		{agentKey("bot"), "read", 0}, {agentKey("bot"), "Bash", 0}, {agentKey("other"), "pay", 0},
		{sessionKey("s1"), "pay", 2}, {sessionKey("s2"), "Read", 1}, {sessionKey("S1"), "pay", 0},
		// Calls without a session share the "" session bucket.
		{sessionKey(""), "pay", 2},
	} {
		if got := l.Calls(tc.key, tc.tool, w, now); got != tc.calls {
			t.Errorf("Calls(%+v, %q) = %d, want %d", tc.key, tc.tool, got, tc.calls)
		}
	}
	for _, tc := range []struct {
		key    engine.UsageKey
		tokens float64
	}{{agentKey("bot"), 150.5}, {sessionKey("s1"), 100}, {sessionKey("s2"), 50.5}, {sessionKey(""), 0}} {
		if got := l.Tokens(tc.key, w, now); got != tc.tokens {
			t.Errorf("Tokens(%+v) = %v, want %v", tc.key, got, tc.tokens)
		}
	}
}

func TestCallsWithoutAnAgentShareOneBucket(t *testing.T) {
	l := newLedger(t, 100, 100)
	must(t, l.Record(engine.Request{"tool_name": "pay"}, t0))
	must(t, l.Record(engine.Request{"tool_name": "pay", "agent_id": 42.0}, t0))
	must(t, l.Record(engine.Request{"tool_name": "pay", "agent_id": ""}, t0))
	if got := l.Calls(agentKey(""), "pay", time.Minute, t0); got != 3 {
		t.Errorf("calls without a string agent_id: %d in the \"\" bucket, want 3", got)
	}
}

func TestLongNamesCostNoMemoryAndStillCount(t *testing.T) {
	l := newLedger(t, 100, 100)
	long := strings.Repeat("x", 1<<20)
	must(t, l.Record(call(long, long, long, 1), t0))
	if got := l.Calls(agentKey(long), long, time.Minute, t0); got != 1 {
		t.Errorf("a megabyte agent id and tool: %d calls, want 1", got)
	}
	if got := l.Calls(agentKey(long[1:]), long, time.Minute, t0); got != 0 {
		t.Errorf("another long id: %d calls, want 0", got)
	}
}

// TestAStaleCounterIsForgottenFirstAndNotCounted: at the key cap, a
// counter whose newest call no limit's window reaches any more makes room,
// and is no eviction.
func TestAStaleCounterIsForgottenFirstAndNotCounted(t *testing.T) {
	l := newLedger(t, 4, 100)
	must(t, l.record(keysOf(call("a", "s", "t", 0), false), nanos(t0), time.Hour))
	must(t, l.record(keysOf(call("b", "s", "t", 0), false), nanos(t0.Add(time.Second)), time.Hour))
	// Two hours on, a's counter is stale for an hour's window: c takes its place.
	must(t, l.record(keysOf(call("c", "s", "t", 0), false), nanos(t0.Add(2*time.Hour)), time.Hour))
	now := t0.Add(2 * time.Hour)
	if got := l.Calls(agentKey("a"), "t", time.Hour, now); got != 0 {
		t.Errorf("forgotten agent a still counts %d", got)
	}
	for _, k := range []engine.UsageKey{agentKey("c"), sessionKey("s")} {
		if got := l.Calls(k, "t", time.Hour, now); got != 1 {
			t.Errorf("%+v: %d calls in the hour, want 1", k, got)
		}
	}
	if l.Evictions() != 0 || l.Keys() != 4 {
		t.Errorf("%d evictions, %d keys; want 0 and 4", l.Evictions(), l.Keys())
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestEventCapMergesIntoTheLaterTime(t *testing.T) {
	l := newLedger(t, 100, 2)
	a := agentKey("a")
	for i := range 3 {
		must(t, l.Record(call("a", "", "pay", 10), t0.Add(time.Duration(i)*time.Minute)))
	}
	now := t0.Add(2 * time.Minute)
	// The first two calls merged at t0+1m: a window that holds only the
	// second one counts both (over-estimate), one holding all counts 3.
	for _, tc := range []struct {
		window      time.Duration
		calls, real int64
	}{{30 * time.Second, 1, 1}, {90 * time.Second, 3, 2}, {time.Hour, 3, 3}} {
		if got := l.Calls(a, "pay", tc.window, now); got != tc.calls {
			t.Errorf("window %v: %d calls, want %d (really %d)", tc.window, got, tc.calls, tc.real)
		}
		if got := l.Tokens(a, tc.window, now); got != 10*float64(tc.calls) {
			t.Errorf("window %v: %v tokens, want %v", tc.window, got, 10*tc.calls)
		}
	}
}

// TestMergingNeverUnderEstimates replays random calls into a ledger with a
// small event cap and checks every count against an exact one: equal while
// no counter can have overflowed, never lower after.
func TestMergingNeverUnderEstimates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		maxEvents := 2 + rng.IntN(8)
		l := newLedger(t, 1000, maxEvents)
		type rec struct {
			at     time.Time
			tool   string
			tokens float64
		}
		var exact []rec
		at := t0
		for range 1 + rng.IntN(60) {
			at = at.Add(time.Duration(rng.IntN(120)) * time.Second) // repeats an instant at times
			r := rec{at, []string{"pay", "Read", "Bash"}[rng.IntN(3)], float64(rng.IntN(5))}
			exact = append(exact, r)
			must(t, l.Record(call("a", "s", r.tool, r.tokens), r.at))
		}
		for range 200 {
			now := at.Add(time.Duration(rng.IntN(3600)) * time.Second)
			window := time.Duration(1+rng.IntN(7200)) * time.Second
			tool := []string{"pay", "Read", "Bash"}[rng.IntN(3)]
			var calls int64
			var tokens float64
			for _, r := range exact {
				if r.at.After(now.Add(-window)) && !r.at.After(now) {
					tokens += r.tokens
					if r.tool == tool {
						calls++
					}
				}
			}
			for _, k := range []engine.UsageKey{agentKey("a"), sessionKey("s")} {
				gotCalls, gotTokens := l.Calls(k, tool, window, now), l.Tokens(k, window, now)
				if gotCalls < calls || gotTokens < tokens {
					t.Fatalf("round %d (cap %d): %s at %v over %v: %d calls, %v tokens; really %d, %v: under-estimated",
						round, maxEvents, tool, now, window, gotCalls, gotTokens, calls, tokens)
				}
				if len(exact) <= maxEvents && (gotCalls != calls || gotTokens != tokens) {
					t.Fatalf("round %d: no counter overflowed, yet %d calls, %v tokens; really %d, %v",
						round, gotCalls, gotTokens, calls, tokens)
				}
			}
		}
	}
}

func TestEventsPastTheLongestWindowAreDropped(t *testing.T) {
	l := newLedger(t, 100, 100)
	must(t, l.Record(call("a", "", "t", 0), t0))
	must(t, l.Record(call("a", "", "t", 0), t0.Add(time.Second)))
	must(t, l.Record(call("a", "", "t", 0), t0.Add(engine.MaxLimitWindow)))
	s := l.series[seriesKey{id: l.hash("a"), tool: l.hash("t")}]
	if s == nil || s.n != 2 {
		t.Fatalf("after a call a longest window later: %+v, want the call at t0 dropped and 2 left", s)
	}
	if got := l.Calls(agentKey("a"), "t", engine.MaxLimitWindow, t0.Add(engine.MaxLimitWindow)); got != 2 {
		t.Errorf("%d calls in the longest window, want 2", got)
	}
}

func TestAnEarlierTimeIsRecordedAtTheNewest(t *testing.T) {
	l := newLedger(t, 100, 100)
	must(t, l.Record(call("a", "", "t", 0), t0))
	must(t, l.Record(call("a", "", "t", 0), t0.Add(-time.Hour))) // a clock stepped back
	if got := l.Calls(agentKey("a"), "t", time.Second, t0); got != 2 {
		t.Errorf("%d calls in the last second, want 2: a call is never counted as older than the newest", got)
	}
}

func TestExtremeTimesDoNotWrap(t *testing.T) {
	l := newLedger(t, 100, 100)
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	early := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, l.Record(call("a", "", "t", 0), early))
	if got := l.Calls(agentKey("a"), "t", time.Hour, early); got != 1 {
		t.Errorf("at year 1: %d calls, want 1", got)
	}
	must(t, l.Record(call("a", "", "t", 0), far))
	if got := l.Calls(agentKey("a"), "t", time.Hour, far); got != 1 {
		t.Errorf("at year 9999: %d calls, want 1", got)
	}
}

func TestHugeTokensSaturateRatherThanWrap(t *testing.T) {
	l := newLedger(t, 100, 100)
	must(t, l.Record(call("a", "", "t", math.MaxFloat64), t0))
	must(t, l.Record(call("a", "", "t", math.MaxFloat64), t0.Add(time.Second)))
	for _, w := range []time.Duration{time.Millisecond, time.Hour} {
		if got := l.Tokens(agentKey("a"), w, t0.Add(time.Second)); !math.IsInf(got, 1) {
			t.Errorf("window %v: %v tokens, want +Inf (over every budget)", w, got)
		}
	}
}

func TestCapsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		keys, events int
		want         string
	}{
		{0, 10, "--usage-max-keys"}, {-1, 10, "--usage-max-keys"}, {MinKeys - 1, 10, "--usage-max-keys must be from 4"},
		{MaxKeysLimit + 1, 10, "--usage-max-keys"},
		{10, 1, "--usage-max-events-per-key must be from 2"}, {10, 0, "--usage-max-events-per-key"},
		{10, MaxEventsLimit + 1, "--usage-max-events-per-key"},
	} {
		_, err := New(tc.keys, tc.events)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%d, %d): %v, want an error naming %s", tc.keys, tc.events, err, tc.want)
		}
	}
	if _, err := New(MinKeys, MinEventsPerKey); err != nil {
		t.Errorf("the smallest caps: %v", err)
	}
}

func TestConcurrentRecordsAreAllCounted(t *testing.T) {
	l := newLedger(t, 1000, 100_000)
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if err := l.Record(call("a", fmt.Sprint("s", w), "pay", 1), t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
					t.Error(err)
				}
				_ = l.Calls(agentKey("a"), "pay", time.Hour, t0.Add(time.Second))
				_ = l.Tokens(sessionKey(fmt.Sprint("s", w)), time.Hour, t0.Add(time.Second))
			}
		})
	}
	wg.Wait()
	now := t0.Add(time.Second)
	if got := l.Calls(agentKey("a"), "pay", time.Hour, now); got != workers*each {
		t.Errorf("%d calls, want %d", got, workers*each)
	}
	if got := l.Tokens(agentKey("a"), time.Hour, now); got != workers*each {
		t.Errorf("%v tokens, want %d", got, workers*each)
	}
}

func TestCountingDoesNotAllocate(t *testing.T) {
	l := newLedger(t, 100, 100)
	for i := range 50 {
		must(t, l.Record(call("agent-1", "s", "pay", 10), t0.Add(time.Duration(i)*time.Second)))
	}
	k := agentKey("agent-1")
	now := t0.Add(time.Minute)
	if n := testing.AllocsPerRun(100, func() { _ = l.Calls(k, "pay", time.Hour, now) }); n != 0 {
		t.Errorf("Calls allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = l.Tokens(k, time.Hour, now) }); n != 0 {
		t.Errorf("Tokens allocates %v times", n)
	}
}

// TestOverflowStaysCloseForEveryWindow: a counter far past its event cap
// (a call a minute for ten days, 64 events kept) still counts each window
// within a fraction of the truth, never under it: merging keeps every
// event near its time instead of folding the whole history into one.
func TestOverflowStaysCloseForEveryWindow(t *testing.T) {
	l := newLedger(t, 10, 64)
	const calls = 10 * 24 * 60
	for i := range calls {
		must(t, l.Record(call("a", "", "t", 1), t0.Add(time.Duration(i)*time.Minute)))
	}
	now := t0.Add((calls - 1) * time.Minute)
	for _, w := range []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour} {
		want := min(int64(w/time.Minute), calls)
		got := l.Calls(agentKey("a"), "t", w, now)
		if got < want || float64(got) > 1.25*float64(want) {
			t.Errorf("window %v: %d calls, really %d: want at most 25%% over", w, got, want)
		}
		t.Logf("window %v: %d calls, really %d", w, got, want)
	}
}

// TestMergingAWrappedRing: the ring is rotated before a merge; whatever
// its start, the counts stay those of an exact count or above, and the
// newest calls exact.
func TestMergingAWrappedRing(t *testing.T) {
	for _, cap := range []int{2, 3, 5, 8, 16} {
		l := newLedger(t, 10, cap)
		for i := range 200 {
			at := t0.Add(time.Duration(i) * time.Second)
			must(t, l.Record(call("a", "", "t", 1), at))
			// A call a second: the last one is always exact, and a
			// window of everything counts everything.
			if got := l.Calls(agentKey("a"), "t", 500*time.Millisecond, at); got != 1 {
				t.Fatalf("cap %d, call %d: the newest second holds %d calls, want 1", cap, i, got)
			}
			if got := l.Calls(agentKey("a"), "t", time.Hour, at); got != int64(i+1) {
				t.Fatalf("cap %d, call %d: the hour holds %d calls, want %d", cap, i, got, i+1)
			}
		}
	}
}
