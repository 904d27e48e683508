package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/usage"
)

// open opens a store on srv's DB 0 for namespace ns, closed at the end.
// Its timeout is long: on a test machine busy with other tests a loopback
// round trip may take past 50ms, and these tests are not about timeouts
// (failure_test.go is, with the default).
func open(t testing.TB, srv *redistest.Server, ns string) *Store {
	t.Helper()
	return openWith(t, srv, ns, 5*time.Second)
}

func openWith(t testing.TB, srv *redistest.Server, ns string, timeout time.Duration) *Store {
	t.Helper()
	return openConfig(t, Config{URL: "redis://" + srv.Addr + "/0", Namespace: ns, Timeout: timeout})
}

// openConfig opens c, trying again while the server does not answer in
// time (a busy test machine), for up to 10s; closed at the end.
func openConfig(t testing.TB, c Config) *Store {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := Open(context.Background(), c)
		if err == nil {
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		if !errors.Is(err, usage.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Open: %v", err)
		}
	}
}

func rate(limit string, max int64, window time.Duration) engine.SharedQuery {
	return engine.SharedQuery{Limit: limit, Key: engine.UsageKey{ID: "shop"}, Tool: "pay", Window: window, Max: max, Add: 1}
}

func budget(limit string, max int64, window time.Duration, tokens float64) engine.SharedQuery {
	return engine.SharedQuery{Limit: limit, Key: engine.UsageKey{ID: "shop"}, Tokens: true, Window: window, Max: max, Add: tokens}
}

func reserve(t testing.TB, s *Store, qs ...engine.SharedQuery) usage.Reservation {
	t.Helper()
	r, err := s.Reserve(context.Background(), time.Now(), qs)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return r
}

// TestReserveCountsEachCounterBeforeTheCall: each reservation returns what
// every counter held before it, and adds to it; counters of other limits,
// agents, sessions, tools and namespaces are apart; the same counter asked
// twice in one call is counted once.
func TestReserveCountsEachCounterBeforeTheCall(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	q := rate("Policy/p/pay-cap/rateLimit", 10, time.Hour)
	for i := range 3 {
		if r := reserve(t, s, q, q); r.Used[0] != float64(i) || r.Used[1] != float64(i) {
			t.Fatalf("reservation %d: used %v, want [%d %d]", i+1, r.Used, i, i)
		}
	}
	other := []engine.SharedQuery{
		rate("Policy/p/other/rateLimit", 10, time.Hour),
		{Limit: q.Limit, Key: engine.UsageKey{ID: "other-agent"}, Tool: "pay", Window: time.Hour, Max: 10, Add: 1},
		{Limit: q.Limit, Key: engine.UsageKey{Session: true, ID: "shop"}, Tool: "pay", Window: time.Hour, Max: 10, Add: 1},
		{Limit: q.Limit, Key: engine.UsageKey{Namespace: true}, Tool: "pay", Window: time.Hour, Max: 10, Add: 1},
		{Limit: q.Limit, Key: engine.UsageKey{ID: "shop"}, Tool: "refund", Window: time.Hour, Max: 10, Add: 1},
	}
	if r := reserve(t, s, other...); fmt.Sprint(r.Used) != "[0 0 0 0 0]" {
		t.Fatalf("other counters: used %v, want all 0", r.Used)
	}
	if r := reserve(t, open(t, srv, "elsewhere"), q); r.Used[0] != 0 {
		t.Fatalf("another namespace's counter: used %v, want 0", r.Used)
	}
	if r := reserve(t, s, q); r.Used[0] != 3 {
		t.Fatalf("the counter after others were counted: %v, want 3", r.Used)
	}
}

// TestSharedTotalsAreExact is the acceptance for counting: three
// stores (three sidecars' connections) and many goroutines reserve one
// counter with max 10 at once; exactly 10 reservations see a count under
// 10 (the calls the limit allows), every other one sees 10 or more.
// Reservations seeing the limit reached are released, as the decision
// core does for calls it denies, and the count ends at exactly 10.
func TestSharedTotalsAreExact(t *testing.T) {
	srv := redistest.Start(t)
	stores := []*Store{open(t, srv, "agents"), open(t, srv, "agents"), open(t, srv, "agents")}
	q := rate("Policy/p/pay-cap/rateLimit", 10, time.Hour)
	const workers, calls = 30, 20
	var (
		mu       sync.Mutex
		under    int
		over     int
		failures []error
		wg       sync.WaitGroup
	)
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for range calls {
				r, err := s.Reserve(context.Background(), time.Now(), []engine.SharedQuery{q})
				if err == nil && r.Used[0] >= 10 {
					err = s.Release(context.Background(), r)
				}
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err)
				case r.Used[0] < 10:
					under++
				default:
					over++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d errors, first: %v", len(failures), failures[0])
	}
	if under != 10 || over != workers*calls-10 {
		t.Fatalf("%d reservations under the limit and %d at it, want 10 and %d", under, over, workers*calls-10)
	}
	if r := reserve(t, stores[0], q); r.Used[0] != 10 {
		t.Fatalf("the counter holds %v after the denied calls were released, want 10", r.Used[0])
	}
}

// TestReleaseTakesBackWhatReserveAdded: a released reservation no longer
// counts, in a rate limit and in a token budget; releasing a reservation
// whose entries are gone changes nothing.
func TestReleaseTakesBackWhatReserveAdded(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	calls, tokens := rate("Policy/p/r/rateLimit", 10, time.Hour), budget("Policy/p/b/tokenBudget", 1000, time.Hour, 120)
	reserve(t, s, calls, tokens)
	r := reserve(t, s, calls, tokens)
	if fmt.Sprint(r.Used) != "[1 120]" {
		t.Fatalf("second reservation: used %v, want [1 120]", r.Used)
	}
	if err := s.Release(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := reserve(t, s, calls, budget(tokens.Limit, 1000, time.Hour, 0)); fmt.Sprint(got.Used) != "[1 120]" {
		t.Fatalf("after the release: used %v, want [1 120] (the released call gone)", got.Used)
	}
	if err := s.Release(context.Background(), usage.Reservation{}); err != nil {
		t.Fatalf("releasing an empty reservation: %v", err)
	}
	if err := s.Release(context.Background(), usage.Reservation{Handle: "not ours"}); !errors.Is(err, usage.ErrUnavailable) {
		t.Fatalf("releasing a foreign handle: %v, want ErrUnavailable", err)
	}
}

// TestTokenBudgetSums: a budget's counter sums the tokens of the calls
// before; a call with no tokens reads it and adds nothing; fractional
// tokens add up.
func TestTokenBudgetSums(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	b := func(tokens float64) engine.SharedQuery {
		return budget("Policy/p/b/tokenBudget", 1000, time.Hour, tokens)
	}
	want := 0.0
	for _, n := range []float64{100, 0, 250.5, 1, 0, 48.5} {
		if r := reserve(t, s, b(n)); r.Used[0] != want {
			t.Fatalf("adding %v: used %v, want %v", n, r.Used[0], want)
		}
		want += n
	}
	if r := reserve(t, s, b(0)); r.Used[0] != 400 {
		t.Fatalf("total %v, want 400", r.Used[0])
	}
}

// TestSharedTokenSumsAreExact: three stores adding tokens to one budget
// at once lose none: each reservation sees a sum of whole calls before
// it, and the budget ends at the exact total.
func TestSharedTokenSumsAreExact(t *testing.T) {
	srv := redistest.Start(t)
	stores := []*Store{open(t, srv, "agents"), open(t, srv, "agents"), open(t, srv, "agents")}
	q := budget("Policy/p/b/tokenBudget", 1_000_000, time.Hour, 7)
	const workers, calls = 12, 25
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[float64]bool{}
		errs []error
	)
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for range calls {
				r, err := s.Reserve(context.Background(), time.Now(), []engine.SharedQuery{q})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					seen[r.Used[0]] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d errors, first: %v", len(errs), errs[0])
	}
	for i := range workers * calls {
		if !seen[float64(7*i)] {
			t.Fatalf("no reservation saw %d tokens before it: sums %d distinct, want each multiple of 7 once", 7*i, len(seen))
		}
	}
	if got := reserve(t, stores[0], budget(q.Limit, q.Max, time.Hour, 0)).Used[0]; got != 7*workers*calls {
		t.Fatalf("the budget holds %v tokens, want %d", got, 7*workers*calls)
	}
}
