package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
)

// peek reads what q's counter holds now, leaving it as it was (a
// reservation given back at once).
func peek(t *testing.T, s *Store, q engine.SharedQuery) float64 {
	t.Helper()
	r := reserve(t, s, q)
	if err := s.Release(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r.Used[0]
}

// stamp is when a reservation ran: between from and to, local clock (the
// same machine's clock as the server's TIME).
type stamp struct{ from, to time.Time }

func reserveAt(t *testing.T, s *Store, q engine.SharedQuery) stamp {
	t.Helper()
	from := time.Now()
	reserve(t, s, q)
	return stamp{from, time.Now()}
}

// waitUntil lets time pass until at (the windows under test are made of
// time passing; this waits for no other goroutine).
func waitUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
}

// TestRateLimitWindowSlides: a call leaves a 1s window no earlier than 1s
// after it was counted, and no later than 1s after that plus the time one
// read takes; the older of two calls leaves first.
func TestRateLimitWindowSlides(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	const window = time.Second
	q := rate("Policy/p/r/rateLimit", 10, window)
	first := reserveAt(t, s, q)
	waitUntil(first.to.Add(400 * time.Millisecond))
	second := reserveAt(t, s, q)
	seen := map[float64]bool{}
	deadline := second.to.Add(window + 2*time.Second)
	for {
		from := time.Now()
		n := peek(t, s, q)
		to := time.Now()
		seen[n] = true
		var want float64 = -1
		switch {
		case to.Before(first.from.Add(window)):
			want = 2 // neither call can have left
		case from.After(first.to.Add(window)) && to.Before(second.from.Add(window)):
			want = 1 // the first has left, the second cannot have
		case from.After(second.to.Add(window)):
			want = 0
		}
		if want >= 0 && n != want {
			t.Fatalf("read in [%s, %s] after the first call: %v, want %v",
				from.Sub(first.to), to.Sub(first.from), n, want)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the window never emptied: %v", n)
		}
		time.Sleep(10 * time.Millisecond) // polling time passing, with a deadline
	}
	if !seen[2] || !seen[1] {
		t.Errorf("counts seen %v, want 2, then 1, then 0", seen)
	}
}

// TestTokenBudgetWindowSlides: tokens leave a 1s window no earlier than
// 1s after they were counted, and at most one bucket (1/64 of the window)
// later than that.
func TestTokenBudgetWindowSlides(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	const window = time.Second
	q := budget("Policy/p/b/tokenBudget", 1000, window, 300)
	read := budget(q.Limit, 1000, window, 0)
	at := reserveAt(t, s, q)
	bucket := window / tokenBuckets
	deadline := at.to.Add(window + 2*time.Second)
	for {
		from := time.Now()
		n := peek(t, s, read)
		to := time.Now()
		if to.Before(at.from.Add(window)) && n != 300 {
			t.Fatalf("%s after the call, inside the window: %v, want 300", from.Sub(at.to), n)
		}
		if from.After(at.to.Add(window+bucket+time.Millisecond)) && n != 0 {
			t.Fatalf("%s after the call, past the window and its bucket: %v, want 0", from.Sub(at.to), n)
		}
		if n == 0 {
			if to.Before(at.from.Add(window)) {
				t.Fatalf("the tokens left %s after the call, before the window", to.Sub(at.from))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the window never emptied: %v", n)
		}
		time.Sleep(5 * time.Millisecond) // polling time passing, with a deadline
	}
}

// TestCountersExpireWithTheirWindow: keys are named as the design says,
// expire within their window, and are gone once it has passed.
func TestCountersExpireWithTheirWindow(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	const window = 1500 * time.Millisecond
	calls := rate("Policy/p/r/rateLimit", 10, window)
	tokens := budget("ClusterPolicy/g/b/tokenBudget", 1000, window, 5)
	ns := engine.SharedQuery{Limit: "Policy/p/n/rateLimit", Key: engine.UsageKey{Namespace: true}, Tool: "pay", Window: window, Max: 3, Add: 1}
	reserve(t, s, calls, tokens, ns)
	keys := []string{
		"toolgate:{default/agents}:Policy/p/r/rateLimit:agent:" + hashPrefix("shop") + ":" + hashPrefix("pay"),
		"toolgate:{default/agents}:ClusterPolicy/g/b/tokenBudget:agent:" + hashPrefix("shop"),
		"toolgate:{default/agents}:Policy/p/n/rateLimit:namespace:" + hashPrefix("") + ":" + hashPrefix("pay"),
	}
	for i, q := range []engine.SharedQuery{calls, tokens, ns} {
		if got := s.key(q); got != keys[i] {
			t.Errorf("key %d: %s, want %s", i, got, keys[i])
		}
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2})
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 || ttl > window {
			t.Errorf("%s: TTL %s %v, want in (0, %s]", k, ttl, err, window)
		}
	}
	deadline := time.Now().Add(window + 3*time.Second)
	for {
		n, err := c.Exists(ctx, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			all, _ := c.Keys(ctx, "*").Result()
			t.Fatalf("keys left after their window: %v", all)
		}
		time.Sleep(20 * time.Millisecond) // polling time passing, with a deadline
	}
}

// TestRateLimitCounterIsBounded: a counter whose calls keep being counted
// past max (a warn rule allows them) keeps max+callSlack entries, and still
// answers that the limit is reached.
func TestRateLimitCounterIsBounded(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	q := rate("Policy/p/warn/rateLimit", 3, time.Hour)
	var last float64
	for range 3 + callSlack + 50 {
		last = reserve(t, s, q).Used[0]
	}
	if last != 3+callSlack {
		t.Fatalf("after %d calls the counter read %v, want it bounded at %d", 3+callSlack+50, last, 3+callSlack)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2})
	defer func() { _ = c.Close() }()
	if n, err := c.ZCard(context.Background(), s.key(q)).Result(); err != nil || n != 3+callSlack+1 {
		t.Fatalf("the counter holds %d entries (%v), want %d", n, err, 3+callSlack+1)
	}
}

// TestAForeignKeyIsAScriptError: a key of another type under the
// counter's name (something else writing into toolgate's keys) fails
// closed, saying it is a script error.
func TestAForeignKeyIsAScriptError(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	q := rate("Policy/p/r/rateLimit", 10, time.Hour)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2})
	defer func() { _ = c.Close() }()
	if err := c.Set(context.Background(), s.key(q), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Reserve(context.Background(), time.Now(), []engine.SharedQuery{q})
	if err == nil || !strings.Contains(err.Error(), "script error") || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("a string under the counter's key: %v, want a script error (WRONGTYPE)", err)
	}
	_, err = s.Reserve(context.Background(), time.Now(), []engine.SharedQuery{{Limit: "x", Window: 0}})
	if err == nil || !strings.Contains(err.Error(), "window 0s is not positive") {
		t.Fatalf("a query without a window: %v", err)
	}
}

// TestScriptsLostByTheServerAreSentAgain: after SCRIPT FLUSH (as after a
// restart or a failover) Reserve and Release still work: EVALSHA's
// NOSCRIPT falls back to EVAL, which loads the script again.
func TestScriptsLostByTheServerAreSentAgain(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2})
	defer func() { _ = c.Close() }()
	q := rate("Policy/p/r/rateLimit", 10, time.Hour)
	reserve(t, s, q)
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	r := reserve(t, s, q)
	if r.Used[0] != 1 {
		t.Fatalf("used %v, want 1", r.Used)
	}
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if n := peek(t, s, q); n != 1 {
		t.Fatalf("after the release: %v, want 1", n)
	}
}
