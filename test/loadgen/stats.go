package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// result is what one run measured.
type result struct {
	elapsed   time.Duration
	latencies []time.Duration // successful requests only
	errors    int
	firstErr  error
	statuses  map[int]int
	decisions map[string]int
	cpu       *cpuMeter // nil when not metered
}

func (r *result) throughput() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(len(r.latencies)) / r.elapsed.Seconds()
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps float error (99.9/100*1000 = 999.0000000000001)
	// from moving the rank up by one.
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d.Nanoseconds())/1e6) }

func (r *result) report(w io.Writer) {
	slices.Sort(r.latencies)
	l := r.latencies
	fmt.Fprintf(w, "requests %d, errors %d, elapsed %v\n", len(l)+r.errors, r.errors, r.elapsed.Round(time.Millisecond))
	if r.firstErr != nil {
		fmt.Fprintf(w, "first error: %v\n", r.firstErr)
	}
	fmt.Fprintf(w, "throughput %.0f decisions/s\n", r.throughput())
	if len(l) > 0 {
		fmt.Fprintf(w, "latency p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
			ms(percentile(l, 50)), ms(percentile(l, 90)), ms(percentile(l, 99)), ms(percentile(l, 99.9)), ms(l[len(l)-1]))
	}
	fmt.Fprintf(w, "statuses %v, decisions %v\n", r.statuses, r.decisions)
	r.reportCPU(w)
}

// reportCPU prints the CPU the server (with -server-pid) and the load
// generator spent per request over the measured run.
func (r *result) reportCPU(w io.Writer) {
	n := len(r.latencies) + r.errors
	if r.cpu == nil || n == 0 || r.elapsed <= 0 {
		return
	}
	per := func(d time.Duration) string {
		return fmt.Sprintf("%.1fus/request (%.2f cores)", float64(d.Nanoseconds())/1e3/float64(n), d.Seconds()/r.elapsed.Seconds())
	}
	switch {
	case r.cpu.err != nil:
		fmt.Fprintf(w, "server cpu unknown: %v\n", r.cpu.err)
	case r.cpu.pid > 0:
		fmt.Fprintf(w, "server cpu %s\n", per(r.cpu.serverCPU))
	}
	if r.cpu.withSidecar {
		fmt.Fprintf(w, "process cpu (sidecar and load generator) %s\n", per(r.cpu.selfCPU))
		return
	}
	fmt.Fprintf(w, "load generator cpu %s\n", per(r.cpu.selfCPU))
}

// compare prints the slow run beside the plain one.
func compare(w io.Writer, plain, slow *result) {
	p, s := plain.latencies, slow.latencies // sorted by report
	if len(p) == 0 || len(s) == 0 {
		return
	}
	fmt.Fprintf(w, "--- side by side      %14s %14s\n", "without", "with slow")
	fmt.Fprintf(w, "throughput (/s)       %14.0f %14.0f\n", plain.throughput(), slow.throughput())
	for _, q := range []float64{50, 99, 99.9} {
		fmt.Fprintf(w, "p%-5v               %14s %14s\n", q, ms(percentile(p, q)), ms(percentile(s, q)))
	}
	fmt.Fprintf(w, "with slow connections, %.1f%% of requests took longer than the plain run's p99\n",
		100*float64(len(s)-countAtMost(s, percentile(p, 99)))/float64(len(s)))
}

// countAtMost counts the sorted durations at most d.
func countAtMost(sorted []time.Duration, d time.Duration) int {
	n, _ := slices.BinarySearch(sorted, d+1)
	return n
}
