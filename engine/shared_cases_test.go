package engine

import (
	"testing"
	"time"
)

// TestGatewaySharedLimits: per: namespace counts every agent's calls;
// store: shared reads the shared store's count (EvalOptions.Shared) when
// there is one, and the local count like a local limit when there is none
// (toolgate eval replaying a history); failOpen changes no decision the
// engine makes (only the decision core's, when the store is down). These
// cases are also the OPA export's (test/regodiff, -write-corpus).
func TestGatewaySharedLimits(t *testing.T) {
	t.Parallel()
	limit := func(l Limit) []Policy {
		return []Policy{ordered("p", gwRule("r", "deny", withWhen(When{RateLimit: &l}))), catchAll()}
	}
	budget := func(l Limit) []Policy {
		return []Policy{ordered("p", gwRule("b", "deny", withWhen(When{TokenBudget: &l}))), catchAll()}
	}
	u := func(sharedOn bool, local, shared []refUsed) *refUsage {
		return &refUsage{calls: local, shared: shared, sharedOn: sharedOn}
	}
	join := func(calls ...[]refUsed) []refUsed {
		var out []refUsed
		for _, c := range calls {
			out = append(out, c...)
		}
		return out
	}
	pay := `{"tool_name":"pay","agent_id":"agent-1","session_id":"s1"}`
	hit, miss, bhit := deniedBy("p", "r"), fallback(), deniedBy("p", "b")
	ns := Limit{Max: 3, Window: "1h", Per: PerNamespace}
	shared := Limit{Max: 3, Window: "1h", Store: StoreShared}
	sharedNS := Limit{Max: 3, Window: "1h", Per: PerNamespace, Store: StoreShared, FailOpen: true}
	runGatewayCases(t, []gwCase{
		{name: "namespace: every agent counts", policies: limit(ns), req: pay,
			usage: u(false, join(usageOf(1, "agent-2", "pay", time.Minute, 0), usageOf(1, "", "pay", time.Minute, 0), usageOf(1, "agent-1", "pay", time.Minute, 0)), nil), want: hit},
		{name: "namespace: under the max", policies: limit(ns), req: pay,
			usage: u(false, join(usageOf(2, "agent-2", "pay", time.Minute, 0), usageOf(5, "agent-2", "Bash", time.Minute, 0)), nil), want: miss},
		{name: "namespace: outside the window", policies: limit(ns), req: pay,
			usage: u(false, usageOf(3, "agent-2", "pay", time.Hour, 0), nil), want: miss},
		{name: "shared: the store's count decides", policies: limit(shared), req: pay,
			usage: u(true, usageOf(1, "agent-1", "pay", time.Minute, 0), usageOf(3, "agent-1", "pay", time.Minute, 0)), want: hit},
		{name: "shared: the local count is not read", policies: limit(shared), req: pay,
			usage: u(true, usageOf(5, "agent-1", "pay", time.Minute, 0), usageOf(2, "agent-1", "pay", time.Minute, 0)), want: miss},
		{name: "shared: other agents in the store do not count", policies: limit(shared), req: pay,
			usage: u(true, nil, usageOf(3, "agent-2", "pay", time.Minute, 0)), want: miss},
		{name: "shared: without a store, the local count", policies: limit(shared), req: pay,
			usage: u(false, usageOf(3, "agent-1", "pay", time.Minute, 0), nil), want: hit},
		{name: "shared per namespace, failOpen: every replica's calls", policies: limit(sharedNS), req: pay,
			usage: u(true, nil, join(usageOf(2, "agent-2", "pay", time.Minute, 0), usageOf(1, "agent-3", "pay", time.Second, 0))), want: hit},
		{name: "shared per namespace, failOpen: under the max", policies: limit(sharedNS), req: pay,
			usage: u(true, usageOf(3, "agent-1", "pay", time.Minute, 0), usageOf(2, "agent-2", "pay", time.Minute, 0)), want: miss},
		{name: "shared budget per session: used + this call over max", policies: budget(Limit{Max: 100, Window: "24h", Per: PerSession, Store: StoreShared}),
			req: `{"tool_name":"a","agent_id":"agent-1","session_id":"s1","tokens":41}`, usage: u(true, nil, usageOf(2, "other", "b", time.Hour, 30)), want: bhit},
		{name: "shared budget per session: at max", policies: budget(Limit{Max: 100, Window: "24h", Per: PerSession, Store: StoreShared}),
			req: `{"tool_name":"a","agent_id":"agent-1","session_id":"s1","tokens":40}`, usage: u(true, nil, usageOf(2, "other", "b", time.Hour, 30)), want: miss},
		{name: "namespace budget: every agent's tokens", policies: budget(Limit{Max: 100, Window: "24h", Per: PerNamespace}),
			req: `{"tool_name":"a","agent_id":"agent-1","tokens":41}`, usage: u(false, join(usageOf(1, "x", "b", time.Hour, 30), usageOf(1, "y", "c", time.Hour, 30)), nil), want: bhit},
	})
}

// TestTheGeneratorReachesSharedLimits: the differential tests mean little
// for issue 30 unless generated cases ask the shared store for every kind
// of counter, and shared limits decide some calls.
func TestTheGeneratorReachesSharedLimits(t *testing.T) {
	t.Parallel()
	const cases = 3000
	seen := map[string]int{}
	for _, data := range gatewayInputs(cases) {
		b, reqs, now, u := generatedGatewayCase(data)
		c, diags := Compile(b)
		if len(diags) > 0 {
			continue
		}
		for _, req := range reqs {
			shared, asked := u.sharedFor(b, req, now)
			res := c.Evaluate(Request(req), EvalOptions{Now: fixedClock(now), Usage: u, Shared: shared})
			if asked == nil {
				continue
			}
			for _, q := range asked.s {
				switch {
				case q.Key.Namespace:
					seen["namespace"]++
				case q.Key.Session:
					seen["session"]++
				default:
					seen["agent"]++
				}
				if q.Tokens {
					seen["tokens"]++
				}
				if q.FailOpen {
					seen["failOpen"]++
				}
			}
			if len(asked.s) > 0 && res.MatchedRuleID != "" {
				seen["decided with a shared limit asked"]++
			}
		}
	}
	t.Logf("shared queries over %d cases: %v", cases, seen)
	for _, k := range []string{"namespace", "session", "agent", "tokens", "failOpen", "decided with a shared limit asked"} {
		if seen[k] < cases/150 {
			t.Errorf("%s: %d times in %d cases", k, seen[k], cases)
		}
	}
}

// fixedShared answers every shared limit with one count, allocating
// nothing: what the decision core's answer from a reservation costs.
type fixedShared float64

func (f fixedShared) Shared(SharedQuery) float64 { return float64(f) }

// sharedBench is a bundle whose call to pay reads a shared rate limit per
// namespace and a shared token budget per agent, both under their max.
func sharedBench(tb testing.TB) (*Compiled, Request) {
	tb.Helper()
	c, diags := Compile(Bundle{Policies: []Policy{ordered("p",
		gwRule("r", "deny", withWhen(When{RateLimit: &Limit{Max: 1 << 40, Window: "1m", Per: PerNamespace, Store: StoreShared, FailOpen: true}})),
		gwRule("b", "deny", withWhen(When{TokenBudget: &Limit{Max: 1 << 40, Window: "1h", Store: StoreShared}}))), catchAll()}})
	if len(diags) > 0 {
		tb.Fatal(diags)
	}
	return c, Request(gwRequest(tb, `{"tool_name":"pay","agent_id":"agent-1","session_id":"s1","tokens":40}`))
}

// TestTheSharedPathDoesNotAllocate: reading shared limits costs the
// engine no allocation (BenchmarkEvaluateSharedLimits measures it).
func TestTheSharedPathDoesNotAllocate(t *testing.T) {
	c, req := sharedBench(t)
	opts := EvalOptions{Now: fixedClock(t0), Shared: fixedShared(7)}
	if res := c.Evaluate(req, opts); res.MatchedRuleID != "fallback" {
		t.Fatalf("%+v, want the fallback", res)
	}
	if n := testing.AllocsPerRun(200, func() { c.Evaluate(req, opts) }); n != 0 {
		t.Errorf("%v allocations per evaluation with shared limits, want 0", n)
	}
}

func BenchmarkEvaluateSharedLimits(b *testing.B) {
	c, req := sharedBench(b)
	opts := EvalOptions{Now: fixedClock(t0), Shared: fixedShared(7)}
	b.ReportAllocs()
	for b.Loop() {
		c.Evaluate(req, opts)
	}
}
