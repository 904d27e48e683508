package sharedlimits

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
)

// The targets for a call under a shared limit, over a loopback
// redis-server, beside the same call under a local limit.
const (
	targetAddedP50 = 150 * time.Microsecond
	targetAddedP99 = time.Millisecond
)

// BenchmarkMeasureLimits is `make measure-limits`: one real sidecar
// process decides, interleaved, 10,000 calls each under a shared limit
// (one round trip to Redis), under a local limit, and under no limit, over
// its Unix socket as an agent would; the added latency is the shared
// call's minus the local one's, at p50 and p99. Then three sidecars count
// one shared limit against one Redis, under concurrent load, for the
// throughput. Run once (-benchtime 1x): it measures by itself.
func BenchmarkMeasureLimits(b *testing.B) {
	calls := 10_000
	if v := os.Getenv("MEASURE_CALLS"); v != "" {
		if _, err := fmt.Sscan(v, &calls); err != nil || calls < 100 {
			b.Fatalf("MEASURE_CALLS=%q: want a number of calls, at least 100", v)
		}
	}
	r := redistest.Start(b)
	bundle := writeBundle(b, sharedBundle(1_000_000_000))
	for range b.N {
		// A 1s timeout: a stall of this busy machine shows in the p99
		// rather than as a deny.
		p := startSidecar(b, "--bundle-file="+bundle, "--usage-store="+storeURL(r), "--usage-store-timeout=1s")
		lat := latencies(b, p, calls)
		shared, local, none := lat["pay"], lat["lookup"], lat["read"]
		fmt.Printf("\nlatency per call, %d calls each, interleaved, one sidecar process over its Unix socket, redis-server on loopback:\n\n", calls)
		fmt.Printf("| call | p50 | p99 |\n| --- | --- | --- |\n")
		for _, row := range []struct {
			name string
			d    []time.Duration
		}{{"shared limit (store: shared, Redis)", shared}, {"local limit (store: local)", local}, {"no limit", none}} {
			fmt.Printf("| %s | %v | %v |\n", row.name, pct(row.d, 50), pct(row.d, 99))
		}
		addedP50, addedP99 := pct(shared, 50)-pct(local, 50), pct(shared, 99)-pct(local, 99)
		fmt.Printf("| added by the shared count | %v (target <= %v) | %v (target <= %v) |\n", addedP50, targetAddedP50, addedP99, targetAddedP99)

		perSecond, each := throughput(b, r, bundle, 3, 8, 5*time.Second)
		fmt.Printf("\nthroughput of 3 sidecar processes, 8 clients each, every call under one shared limit in one redis-server: %.0f decisions/s (calls per sidecar in that time: %v)\n\n", perSecond, each)
		if addedP50 > targetAddedP50 || addedP99 > targetAddedP99 {
			b.Errorf("added latency p50 %v / p99 %v is over the target %v / %v", addedP50, addedP99, targetAddedP50, targetAddedP99)
		}
	}
}

// latencies decides calls of each tool, interleaved after a warm-up, and
// returns each tool's latencies sorted.
func latencies(b *testing.B, p *proc, calls int) map[string][]time.Duration {
	tools := []string{"pay", "lookup", "read"}
	for range 500 {
		for _, tool := range tools {
			p.mustDecide(tool, "warm-up")
		}
	}
	out := map[string][]time.Duration{}
	for i := range calls {
		for _, tool := range tools {
			began := time.Now()
			d := p.mustDecide(tool, "measured")
			took := time.Since(began)
			if d.Decision != engine.Allow {
				b.Fatalf("%s call %d: %+v, want allowed", tool, i, d)
			}
			out[tool] = append(out[tool], took)
		}
	}
	for _, d := range out {
		slices.Sort(d)
	}
	return out
}

// throughput runs sidecars sidecar processes sharing r, clients clients
// on each calling pay for d, and returns the decisions per second in
// total and per sidecar.
func throughput(b *testing.B, r *redistest.Server, bundle string, sidecars, clients int, d time.Duration) (float64, []int64) {
	var procs []*proc
	for range sidecars {
		procs = append(procs, startSidecar(b, "--bundle-file="+bundle, "--usage-store="+storeURL(r), "--usage-store-timeout=1s"))
	}
	counts := make([]atomic.Int64, sidecars)
	var failed atomic.Value
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for i, p := range procs {
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				agent := fmt.Sprintf("agent-%d-%d", i, c)
				for time.Now().Before(stop) {
					dec, err := p.decide("pay", agent)
					if err == nil && dec.Decision != engine.Allow {
						err = fmt.Errorf("pay: %+v, want allowed", dec)
					}
					if err != nil {
						failed.Store(err)
						return
					}
					counts[i].Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	var total int64
	each := make([]int64, sidecars)
	for i := range counts {
		each[i] = counts[i].Load()
		total += each[i]
	}
	return float64(total) / d.Seconds(), each
}

// pct is the p-th percentile of sorted.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}
