package redisstore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
)

// BenchmarkReserve is the round trip a call under shared limits adds,
// against a real redis-server on loopback: one counter, three (a rate
// limit per agent, one per namespace and a token budget, one script), and
// a token budget alone; one counter reserved by 8 goroutines at once; and a bare PING (Check),
// the round trip alone, for comparison. p50-us and p99-us are the
// latency percentiles of single reservations (the target: p50 <=
// 150us, p99 <= 1ms).
func BenchmarkReserve(b *testing.B) {
	srv := redistest.Start(b)
	s := open(b, srv, "agents")
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2})
	defer func() { _ = admin.Close() }()
	one := []engine.SharedQuery{rate("Policy/p/pay/rateLimit", 1<<40, time.Hour)}
	three := append(slices.Clone(one),
		engine.SharedQuery{Limit: "Policy/p/ns/rateLimit", Key: engine.UsageKey{Namespace: true}, Tool: "pay", Window: time.Minute, Max: 1 << 40, Add: 1},
		budget("Policy/p/tokens/tokenBudget", 1<<40, 24*time.Hour, 350))
	for _, bc := range []struct {
		name     string
		counters []engine.SharedQuery
		parallel int
	}{
		{"ping", nil, 1},
		{"counters=1", one, 1},
		{"counters=1/tokens", three[2:], 1},
		{"counters=3", three, 1},
		{"counters=1/goroutines=8", one, 8},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if err := admin.ConfigResetStat(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
			lat := make([][]time.Duration, bc.parallel)
			per := b.N/bc.parallel + 1
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := range bc.parallel {
				wg.Go(func() {
					l := make([]time.Duration, 0, per)
					for range per {
						start := time.Now()
						var err error
						if bc.counters == nil {
							err = s.Check(context.Background())
						} else {
							_, err = s.Reserve(context.Background(), start, bc.counters)
						}
						if err != nil {
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
			b.ReportMetric(serverMicros(b, admin), "server-us")
		})
	}
}

// serverMicros is the time the server spent per EVALSHA (or PING), from
// INFO commandstats: what the script costs, apart from the network and
// the client.
func serverMicros(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_ping:"} {
		for line := range strings.SplitSeq(info, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd)
			if !ok {
				continue
			}
			for field := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(field, "usec_per_call="); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						b.Fatal(err)
					}
					return f
				}
			}
		}
	}
	return 0
}
