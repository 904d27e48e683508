package sharedlimits

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/usage/redisstore"
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
// call's minus the local one's, at p50 and p99. Interleaved with them, the
// floor: the same reservation made from this process (redisstore.Store,
// EVALSHA of the reserve script) and a bare PING over a net.Conn,
// what one round trip to redis-server costs on this machine at that
// moment. Then three sidecars count one shared limit against one Redis,
// under concurrent load, for the throughput. Run once (-benchtime 1x): it
// measures by itself.
//
// MEASURE_BASE (a git revision, or the path of a toolgate binary) measures
// that sidecar beside this one, alternating, MEASURE_PAIRS times (default
// 3): a change's before and after on the same machine at the same time.
func BenchmarkMeasureLimits(b *testing.B) {
	calls := envInt(b, "MEASURE_CALLS", 10_000, 100)
	r := redistest.Start(b)
	bundle := writeBundle(b, sharedBundle(1_000_000_000))
	bins := []binary{{"this", toolgateBin}}
	pairs := 1
	if base := os.Getenv("MEASURE_BASE"); base != "" {
		bins = []binary{{"base " + base, baseBinary(b, base)}, {"this", toolgateBin}}
		pairs = envInt(b, "MEASURE_PAIRS", 3, 1)
	}
	fl := newFloor(b, r)
	for range b.N {
		var runs []measured
		tabled := map[string]bool{}
		for range pairs {
			for _, bin := range bins {
				// A 1s timeout: a stall of this busy machine shows in the
				// p99 rather than as a deny.
				p := startSidecarBin(b, bin.path, "--bundle-file="+bundle, "--usage-store="+storeURL(r), "--usage-store-timeout=1s")
				m := measure(b, p, fl, calls)
				m.bin = bin.name
				p.stop()
				runs = append(runs, m)
				if !tabled[bin.name] {
					tabled[bin.name] = true
					m.table(calls)
				}
			}
		}
		if len(runs) > 1 {
			fmt.Printf("\n%d runs, alternating, %d calls each:\n\n", len(runs), calls)
			fmt.Printf("| run | sidecar | added p50 | added p99 | sidecar's mean round trip | floor: reserve p50 | floor: PING p50 |\n| --- | --- | --- | --- | --- | --- | --- |\n")
			for i, m := range runs {
				fmt.Printf("| %d | %s | %v | %v | %v | %v | %v |\n", i+1, m.bin, m.addedP50(), m.addedP99(), m.storeMean, pct(m.reserve, 50), pct(m.ping, 50))
			}
		}
		var addedP50, addedP99 []time.Duration
		for _, bin := range bins {
			var p50, p99 []time.Duration
			for _, m := range runs {
				if m.bin == bin.name {
					p50, p99 = append(p50, m.addedP50()), append(p99, m.addedP99())
				}
			}
			slices.Sort(p50)
			slices.Sort(p99)
			fmt.Printf("\n%s: added p50 %v, p99 %v (median of %d runs)", bin.name, p50[len(p50)/2], p99[len(p99)/2], len(p50))
			addedP50, addedP99 = p50, p99
		}
		fmt.Println()

		perSecond, each := throughput(b, r, bundle, 3, 8, 5*time.Second)
		fmt.Printf("\nthroughput of 3 sidecar processes, 8 clients each, every call under one shared limit in one redis-server: %.0f decisions/s (calls per sidecar in that time: %v)\n\n", perSecond, each)
		if p50, p99 := addedP50[len(addedP50)/2], addedP99[len(addedP99)/2]; p50 > targetAddedP50 || p99 > targetAddedP99 {
			b.Errorf("added latency p50 %v / p99 %v is over the target %v / %v", p50, p99, targetAddedP50, targetAddedP99)
		}
	}
}

// binary is a toolgate binary measured, and what the tables call it.
type binary struct{ name, path string }

// baseBinary is MEASURE_BASE's toolgate: the file it names, or the
// revision it names, built.
func baseBinary(b *testing.B, base string) string {
	if fi, err := os.Stat(base); err == nil && fi.Mode().IsRegular() {
		return base
	}
	dir := b.TempDir()
	if err := localcluster.BuildAt(dir, base, "toolgate-base"); err != nil {
		b.Fatalf("MEASURE_BASE=%s: %v", base, err)
	}
	return filepath.Join(dir, "toolgate-base")
}

// envInt reads a count from the environment (def when unset).
func envInt(b *testing.B, name string, def, least int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		b.Fatalf("%s=%q: want a number, at least %d", name, v, least)
	}
	return n
}

// measured is one sidecar's run: each kind of call's latencies, sorted.
type measured struct {
	bin                                string
	shared, local, none, reserve, ping []time.Duration
	// storeMean is the sidecar's own mean round trip to the store (its
	// toolgate_usage_store_duration_seconds).
	storeMean time.Duration
}

func (m measured) addedP50() time.Duration { return pct(m.shared, 50) - pct(m.local, 50) }
func (m measured) addedP99() time.Duration { return pct(m.shared, 99) - pct(m.local, 99) }

func (m measured) table(calls int) {
	fmt.Printf("\nlatency per call, %d calls each, interleaved, one sidecar process (%s) over its Unix socket, redis-server on loopback:\n\n", calls, m.bin)
	fmt.Printf("| call | p50 | p99 |\n| --- | --- | --- |\n")
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{{"shared limit (store: shared, Redis)", m.shared}, {"local limit (store: local)", m.local}, {"no limit", m.none}} {
		fmt.Printf("| %s | %v | %v |\n", row.name, pct(row.d, 50), pct(row.d, 99))
	}
	fmt.Printf("| **added by the shared count** | **%v** (target <= %v) | **%v** (target <= %v) |\n", m.addedP50(), targetAddedP50, m.addedP99(), targetAddedP99)
	fmt.Printf("| floor: the same reservation from this process (redisstore.Store) | %v | %v |\n", pct(m.reserve, 50), pct(m.reserve, 99))
	fmt.Printf("| floor: a bare PING over a net.Conn | %v | %v |\n", pct(m.ping, 50), pct(m.ping, 99))
	fmt.Printf("\nthe sidecar's own mean round trip to Redis: %v\n", m.storeMean)
}

// floor makes, from this process, the round trips a shared call cannot
// do without: a reservation like the sidecar's (the same store code and
// script, its own namespace's keys) and a bare RESP PING.
type floor struct {
	store *redisstore.Store
	conn  net.Conn
	rd    *bufio.Reader
	query []engine.SharedQuery
}

func newFloor(b *testing.B, r *redistest.Server) *floor {
	st, err := redisstore.Open(context.Background(), redisstore.Config{URL: storeURL(r), Namespace: "floor", Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	c, err := net.Dial("tcp", r.Addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return &floor{store: st, conn: c, rd: bufio.NewReader(c), query: []engine.SharedQuery{{
		Limit: "Policy/limits/pay-per-namespace/rateLimit", Key: engine.UsageKey{Namespace: true}, Tool: "pay",
		Window: time.Hour, Max: 1_000_000_000, Add: 1,
	}}}
}

func (f *floor) reserve(b *testing.B) time.Duration {
	began := time.Now()
	if _, err := f.store.Reserve(context.Background(), began, f.query); err != nil {
		b.Fatal(err)
	}
	return time.Since(began)
}

var ping = []byte("*1\r\n$4\r\nPING\r\n")

func (f *floor) ping(b *testing.B) time.Duration {
	began := time.Now()
	if _, err := f.conn.Write(ping); err != nil {
		b.Fatal(err)
	}
	line, err := f.rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+PONG") {
		b.Fatalf("PING: %q, %v", line, err)
	}
	return time.Since(began)
}

// measure decides calls of each tool, interleaved with the floor's round
// trips, after a warm-up.
func measure(b *testing.B, p *proc, fl *floor, calls int) measured {
	tools := []string{"pay", "lookup", "read"}
	for range 500 {
		for _, tool := range tools {
			p.mustDecide(tool, "warm-up")
		}
		fl.reserve(b)
		fl.ping(b)
	}
	before := storeSeconds(p)
	lat := map[string][]time.Duration{}
	var m measured
	for i := range calls {
		for _, tool := range tools {
			began := time.Now()
			d := p.mustDecide(tool, "measured")
			took := time.Since(began)
			if d.Decision != engine.Allow {
				b.Fatalf("%s call %d: %+v, want allowed", tool, i, d)
			}
			lat[tool] = append(lat[tool], took)
		}
		m.reserve = append(m.reserve, fl.reserve(b))
		m.ping = append(m.ping, fl.ping(b))
	}
	after := storeSeconds(p)
	if n := after[1] - before[1]; n > 0 {
		m.storeMean = time.Duration((after[0] - before[0]) / n * float64(time.Second)).Round(100 * time.Nanosecond)
	}
	m.shared, m.local, m.none = lat["pay"], lat["lookup"], lat["read"]
	for _, d := range [][]time.Duration{m.shared, m.local, m.none, m.reserve, m.ping} {
		slices.Sort(d)
	}
	return m
}

// storeSeconds is the sidecar's toolgate_usage_store_duration_seconds sum
// and count.
func storeSeconds(p *proc) [2]float64 {
	var out [2]float64
	for i, s := range []string{"_sum", "_count"} {
		out[i], _ = strconv.ParseFloat(p.metric("toolgate_usage_store_duration_seconds"+s), 64)
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
