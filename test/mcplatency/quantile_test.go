package main

import (
	"math"
	"testing"
	"time"
)

func TestHeldQuantileInterpolatesAsPromQL(t *testing.T) {
	// Since before: 10 observations up to 10 µs, 10 more up to 20 µs, 80
	// more up to 50 µs, and 4 past the last finite bound: 104 in all.
	before := heldBuckets{upper: []float64{10e-6, 20e-6, 50e-6, math.Inf(1)}, count: []uint64{5, 5, 5, 5}}
	after := heldBuckets{upper: before.upper, count: []uint64{15, 25, 105, 109}}
	hb := after.minus(before)
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.05, 5 * time.Microsecond},  // rank 5.2 of the first 10, from 0: 5.2 µs
		{0.15, 16 * time.Microsecond}, // rank 15.6: 10 + 10*5.6/10 = 15.6 µs
		{0.5, 32 * time.Microsecond},  // rank 52: 20 + 30*32/80 = 32 µs
		{0.99, 50 * time.Microsecond}, // rank 103 is past 50 µs: that bound
	} {
		if got := hb.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := (heldBuckets{}).quantile(0.5); got != 0 {
		t.Errorf("no buckets: %v, want 0", got)
	}
}
