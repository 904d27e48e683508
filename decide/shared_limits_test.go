package decide

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/usage/redisstore"
)

// sharedPolicy limits pay to max calls an hour across the namespace (in
// the shared store), tip likewise with failOpen, and lookup per agent in
// each sidecar; read is unlimited.
func sharedPolicy(max int64) engine.Bundle {
	return engine.Bundle{Policies: []engine.Policy{{ID: "limits", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "pay-shared", Effect: "deny", Targets: &engine.Targets{Tools: []string{"pay"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: max, Window: "1h", Per: engine.PerNamespace, Store: engine.StoreShared}}},
		{ID: "tip-shared", Effect: "deny", Targets: &engine.Targets{Tools: []string{"tip"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: max, Window: "1h", Per: engine.PerNamespace, Store: engine.StoreShared, FailOpen: true}}},
		{ID: "lookup-local", Effect: "deny", Targets: &engine.Targets{Tools: []string{"lookup"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: max, Window: "1h"}}},
	}}}}
}

func compile(t testing.TB, b engine.Bundle) *engine.Compiled {
	t.Helper()
	c, diags := engine.Compile(b)
	if c == nil {
		t.Fatalf("compile: %v", diags)
	}
	return c
}

// storeDecider is a Decider counting shared limits in the Redis at addr,
// serving b.
func storeDecider(t testing.TB, addr string, b engine.Bundle) *Decider {
	t.Helper()
	st, err := redisstore.Open(context.Background(), redisstore.Config{URL: "redis://" + addr + "/0", Namespace: "agents", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	d, err := NewInProcess(Config{SharedStore: st, UsageStoreTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.Serve(compile(t, b), "r1", "test", time.Now())
	return d
}

func call(tool, agent string) engine.Request {
	return engine.Request{"tool_name": tool, "agent_id": agent}
}

// Two deciders with one store allow the limit once in total; the calls
// they deny are given back, so the count is the calls allowed: a bundle
// raising the limit by one lets exactly one more through.
func TestSharedLimitCountsOnceAcrossDecidersAndGivesDenialsBack(t *testing.T) {
	r := redistest.Start(t)
	a, b := storeDecider(t, r.Addr, sharedPolicy(3)), storeDecider(t, r.Addr, sharedPolicy(3))
	allowed := 0
	for i := range 10 {
		for _, d := range []*Decider{a, b} {
			res, _ := d.Decide(call("pay", "agent-"+string(rune('a'+i))), false, nil)
			switch {
			case res.Decision == engine.Allow:
				allowed++
			case res.MatchedRuleID != "pay-shared":
				t.Fatalf("pay %d: %+v, want allowed or denied by pay-shared", i, res)
			}
		}
	}
	if allowed != 3 {
		t.Fatalf("%d pay calls allowed through two deciders of one store, want 3", allowed)
	}
	a.Serve(compile(t, sharedPolicy(4)), "r2", "test", time.Now())
	if res, _ := a.Decide(call("pay", "z"), false, nil); res.Decision != engine.Allow {
		t.Fatalf("pay under a limit raised to 4: %+v, want allowed (17 denied calls were given back)", res)
	}
	if res, _ := a.Decide(call("pay", "z"), false, nil); res.Decision != engine.Deny {
		t.Fatalf("the 5th pay under a limit of 4: %+v", res)
	}
}

// Without a store, a call a shared limit reaches is denied
// USAGE_UNAVAILABLE saying why, unless the limit has failOpen (allowed,
// with a warning); other calls are decided as always, and the local
// ledger does not count the calls it denied.
func TestWithoutAStoreSharedLimitsFailClosedUnlessFailOpen(t *testing.T) {
	d, err := NewInProcess(Config{})
	if err != nil {
		t.Fatal(err)
	}
	d.Serve(compile(t, sharedPolicy(1)), "r", "test", time.Now())
	res, _ := d.Decide(call("pay", "a"), false, nil)
	if res.Decision != engine.Deny || res.Code != CodeUsageUnavailable ||
		!strings.Contains(res.Reason, "--usage-store") || !strings.Contains(res.Reason, "Policy/limits/pay-shared/rateLimit") {
		t.Fatalf("pay without a store: %+v, want deny %s naming --usage-store and the limit", res, CodeUsageUnavailable)
	}
	res, _ = d.Decide(call("tip", "a"), false, nil)
	if res.Decision != engine.Allow || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "failOpen") {
		t.Fatalf("tip (failOpen) without a store: %+v, want allowed with a warning", res)
	}
	for _, tool := range []string{"read", "lookup"} {
		if res, _ := d.Decide(call(tool, "a"), false, nil); res.Decision != engine.Allow {
			t.Fatalf("%s without a store: %+v, want allowed", tool, res)
		}
	}
	if res, _ := d.Decide(call("lookup", "a"), false, nil); res.MatchedRuleID != "lookup-local" {
		t.Fatalf("a second lookup: %+v, want denied by its local limit of 1", res)
	}
}

// A killed store: limited calls are denied at once with the reason, and
// counted again once it is back.
func TestAKilledStoreDeniesAndRecovers(t *testing.T) {
	r := redistest.Start(t)
	d := storeDecider(t, r.Addr, sharedPolicy(100))
	if res, _ := d.Decide(call("pay", "a"), false, nil); res.Decision != engine.Allow {
		t.Fatalf("pay: %+v", res)
	}
	r.Stop()
	res, _ := d.Decide(call("pay", "a"), false, nil)
	if res.Code != CodeUsageUnavailable || !strings.Contains(res.Reason, "usage store is unavailable") {
		t.Fatalf("pay with the store killed: %+v", res)
	}
	if res, _ := d.Decide(call("read", "a"), false, nil); res.Decision != engine.Allow {
		t.Fatalf("read with the store killed: %+v", res)
	}
	r.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, _ := d.Decide(call("pay", "a"), false, nil)
		if res.Decision == engine.Allow {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pay after the store restarted: %+v", res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A call no shared limit reaches costs no more with shared limits in the
// bundle than with local ones: no round trip, no allocation added.
func TestUnlimitedCallsAllocateNoMoreWithSharedLimits(t *testing.T) {
	local := sharedPolicy(1_000_000)
	local.Policies[0].Rules = local.Policies[0].Rules[2:] // lookup-local only
	allocs := func(b engine.Bundle) float64 {
		d, err := NewInProcess(Config{})
		if err != nil {
			t.Fatal(err)
		}
		d.Serve(compile(t, b), "r", "test", time.Now())
		req := call("read", "a")
		return testing.AllocsPerRun(1000, func() { d.Decide(req, false, nil) })
	}
	withShared, withLocal := allocs(sharedPolicy(1_000_000)), allocs(local)
	if withShared > withLocal {
		t.Errorf("an unlimited call allocates %v times with shared limits in the bundle, %v with local ones only", withShared, withLocal)
	}
}

// BenchmarkDecide: an unlimited call with no limits, local limits and
// shared limits in the bundle, and a call under a shared limit in a
// loopback Redis.
func BenchmarkDecide(b *testing.B) {
	none := engine.Bundle{Policies: []engine.Policy{{ID: "p", Version: 1, DefaultEffect: "allow",
		Rules: []engine.Rule{{ID: "no-rm", Effect: "deny", Targets: &engine.Targets{Tools: []string{"rm"}}}}}}}
	local := sharedPolicy(1_000_000_000)
	local.Policies[0].Rules = local.Policies[0].Rules[2:]
	r := redistest.Start(b)
	for _, c := range []struct {
		name, tool string
		bundle     engine.Bundle
	}{
		{"unlimited/no-limits", "read", none},
		{"unlimited/local-limits", "read", local},
		{"unlimited/shared-limits", "read", sharedPolicy(1_000_000_000)},
		{"limited/local", "lookup", sharedPolicy(1_000_000_000)},
		{"limited/shared-redis", "pay", sharedPolicy(1_000_000_000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			d := storeDecider(b, r.Addr, c.bundle)
			req := call(c.tool, "a")
			b.ReportAllocs()
			for b.Loop() {
				if res, _ := d.Decide(req, false, nil); res.Decision != engine.Allow {
					b.Fatalf("%+v", res)
				}
			}
		})
	}
}
