package redisstore

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
)

// BenchmarkReserve is the round trip a call under shared limits adds,
// against a real redis-server on loopback: one counter, three (a rate
// limit per agent, one per namespace and a token budget, one script), and
// one counter reserved by 8 goroutines at once. p50-us and p99-us are the
// latency percentiles of single reservations (the target: p50 <=
// 150us, p99 <= 1ms).
func BenchmarkReserve(b *testing.B) {
	srv := redistest.Start(b)
	s := open(b, srv, "agents")
	one := []engine.SharedQuery{rate("Policy/p/pay/rateLimit", 1<<40, time.Hour)}
	three := append(slices.Clone(one),
		engine.SharedQuery{Limit: "Policy/p/ns/rateLimit", Key: engine.UsageKey{Namespace: true}, Tool: "pay", Window: time.Minute, Max: 1 << 40, Add: 1},
		budget("Policy/p/tokens/tokenBudget", 1<<40, 24*time.Hour, 350))
	for _, bc := range []struct {
		name     string
		counters []engine.SharedQuery
		parallel int
	}{
		{"counters=1", one, 1},
		{"counters=3", three, 1},
		{"counters=1/goroutines=8", one, 8},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lat := make([][]time.Duration, bc.parallel)
			per := b.N/bc.parallel + 1
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := range bc.parallel {
				wg.Go(func() {
					l := make([]time.Duration, 0, per)
					for range per {
						start := time.Now()
						if _, err := s.Reserve(context.Background(), start, bc.counters); err != nil {
							b.Error(err)
							return
						}
						l = append(l, time.Since(start))
					}
					lat[g] = l
				})
			}
			wg.Wait()
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) == 0 {
				return
			}
			pct := func(p float64) float64 {
				return float64(all[int(p*float64(len(all)-1))].Nanoseconds()) / 1e3
			}
			b.ReportMetric(pct(0.50), "p50-us")
			b.ReportMetric(pct(0.99), "p99-us")
		})
	}
}
