package decide

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/usage"
)

// DefaultUsageStoreTimeout bounds one round trip to the shared usage store
// (--usage-store-timeout): a limited call waits at most this long before it
// is denied USAGE_UNAVAILABLE.
const DefaultUsageStoreTimeout = 50 * time.Millisecond

// StoreMetrics are the shared usage store's families (the names the issue
// fixes, without the sidecar's prefix: they describe the store, which every
// sidecar of a namespace shares).
type StoreMetrics struct {
	// Up is 1 while the store answers (the sidecar's health check).
	Up       prometheus.Gauge
	ok       prometheus.Counter
	failed   prometheus.Counter
	timedOut prometheus.Counter
	Duration prometheus.Histogram
}

// NewStoreMetrics makes the store's families and registers them in reg.
func NewStoreMetrics(reg prometheus.Registerer) *StoreMetrics {
	m := &StoreMetrics{}
	m.Up = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolgate_usage_store_up", Help: "1 while the shared usage store (--usage-store) answers, 0 while it does not: calls under a shared limit are then denied USAGE_UNAVAILABLE (or let through uncounted with failOpen) and the sidecar is not ready.",
	})
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_usage_store_requests_total", Help: "Round trips to the shared usage store (reserve, release), by result: ok, error or timeout (--usage-store-timeout).",
	}, []string{"result"})
	m.ok, m.failed, m.timedOut = requests.WithLabelValues("ok"), requests.WithLabelValues("error"), requests.WithLabelValues("timeout")
	m.Duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "toolgate_usage_store_duration_seconds", Help: "Time of one round trip to the shared usage store (reserve or release).",
		Buckets: []float64{25e-6, 50e-6, 100e-6, 150e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3},
	})
	reg.MustRegister(m.Up, requests, m.Duration)
	return m
}

// observe counts one round trip that started at start and ended with err,
// ctx being its deadline.
func (m *StoreMetrics) observe(ctx context.Context, start time.Time, err error) {
	if m == nil {
		return
	}
	m.Duration.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		m.ok.Inc()
	case timedOut(ctx, err):
		m.timedOut.Inc()
	default:
		m.failed.Inc()
	}
}

// decideShared decides a call of a bundle with shared limits: one round
// trip to the store for a call a shared limit reaches, none for the
// others (usage.Ledger.DecideShared), and a second only to give the
// reservation back when the call is not allowed after all.
//
// approved is set when the call is an ask a person approved, being let
// through (consume): its ask is then counted as an allow would be, in the
// same round trip, and refused (the error) when a shared limit it read
// could not be counted and has no failOpen. Its reservation is returned,
// for consume to give back if the call is not let through after all; any
// other call's is settled here (nil).
func (d *Decider) decideShared(c *engine.Compiled, req engine.Request, opts engine.EvalOptions, approved bool) (engine.Result, *sharedCounts, error) {
	var counts *sharedCounts
	res, err := d.usage.DecideShared(c, req, opts, func(asked []engine.SharedQuery) usage.SharedCounts {
		counts = d.reserve(asked)
		return counts
	})
	if counts == nil {
		return res, nil, err
	}
	asking := approved && err == nil && res.Decision == engine.Ask
	if asking {
		// DecideShared checks only an allow's counts.
		err = counts.Uncounted()
	}
	kept := err == nil && (res.Decision == engine.Allow || asking)
	if !kept {
		d.giveBack(counts)
	}
	if kept && counts.missing != "" {
		// Every limit that could not be counted has failOpen: say so
		// where the decision log and the client see it.
		res.Warnings = append(res.Warnings[:len(res.Warnings):len(res.Warnings)],
			"shared limit not counted, allowed by failOpen: "+counts.missing)
	}
	if !asking {
		counts = nil
	}
	return res, counts, err
}

// giveBack releases what a call reserved when it is not let through
// after all (not allowed, or an approved call refused later); nil is
// nothing.
func (d *Decider) giveBack(counts *sharedCounts) {
	if counts != nil && counts.reserved {
		d.release(counts.reservation)
		counts.reserved = false
	}
}

// reserve makes the round trip for the shared counters asked, bounded by
// --usage-store-timeout.
func (d *Decider) reserve(asked []engine.SharedQuery) *sharedCounts {
	counts := &sharedCounts{asked: asked}
	if d.cfg.SharedStore == nil {
		counts.why = "this sidecar has no usage store (--usage-store)"
		return counts
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.storeTimeout())
	defer cancel()
	start := time.Now()
	r, err := d.cfg.SharedStore.Reserve(ctx, d.now(), asked)
	d.cfg.StoreMetrics.observe(ctx, start, err)
	switch {
	case err == nil && len(r.Used) != len(asked):
		// A store that answers another number of counters than it was
		// asked is wrong about some: none is trusted, and what it
		// reserved is given back.
		d.release(r)
		counts.why = fmt.Sprintf("the usage store answered %d counts for %d counters", len(r.Used), len(asked))
	case err == nil:
		counts.reserved, counts.reservation = true, r
	case timedOut(ctx, err):
		counts.why = fmt.Sprintf("the usage store did not answer within %v (--usage-store-timeout)", d.storeTimeout())
	default:
		counts.why = "the usage store is unavailable: " + err.Error()
	}
	return counts
}

// release gives back what a reservation added; a failure only over-counts
// (other sidecars may deny early), so it is counted, never a decision.
func (d *Decider) release(r usage.Reservation) {
	ctx, cancel := context.WithTimeout(context.Background(), d.storeTimeout())
	defer cancel()
	start := time.Now()
	err := d.cfg.SharedStore.Release(ctx, r)
	d.cfg.StoreMetrics.observe(ctx, start, err)
	if err != nil {
		d.logger.Debug("giving back a shared usage reservation failed: the counters over-count until their window passes", "error", err)
	}
}

// timedOut tells a store call that ran out of time (ctx's deadline, or the
// store's own, which it reports as context.DeadlineExceeded) from one that
// failed.
func timedOut(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)
}

func (d *Decider) storeTimeout() time.Duration {
	if d.cfg.UsageStoreTimeout > 0 {
		return d.cfg.UsageStoreTimeout
	}
	return DefaultUsageStoreTimeout
}

func (d *Decider) now() time.Time {
	if d.cfg.Now != nil {
		return d.cfg.Now()
	}
	return time.Now()
}

// sharedCounts answers the second pass from a reservation. A counter it
// has no count for (the store failed, or the second pass reached a limit
// the first did not) answers 0 and is noted: an allowed call is then denied
// USAGE_UNAVAILABLE unless every such limit has failOpen.
type sharedCounts struct {
	asked       []engine.SharedQuery
	reserved    bool
	reservation usage.Reservation
	// why the store gave no counts ("" when it did).
	why string
	// missing names the limits answered without a count, failClosed
	// whether one of them lacks failOpen.
	missing    string
	failClosed bool
}

func (s *sharedCounts) Shared(q engine.SharedQuery) float64 {
	if s.reserved {
		for i := range s.asked {
			if s.asked[i] == q {
				return s.reservation.Used[i]
			}
		}
	}
	s.miss(q)
	return 0
}

func (s *sharedCounts) miss(q engine.SharedQuery) {
	if !strings.Contains(s.missing, q.Limit) {
		if s.missing != "" {
			s.missing += ", "
		}
		s.missing += q.Limit
	}
	s.failClosed = s.failClosed || !q.FailOpen
}

func (s *sharedCounts) Uncounted() error {
	if !s.failClosed {
		return nil
	}
	why := s.why
	if why == "" {
		why = "the decision reached a shared limit it had not reserved in the store"
	}
	return &storeUnavailable{fmt.Sprintf("%s: shared limit %s could not be counted; denied to fail closed", why, s.missing)}
}

// storeUnavailable is a usage.ErrUnavailable whose message is the deny's
// reason.
type storeUnavailable struct{ reason string }

func (e *storeUnavailable) Error() string        { return e.reason }
func (e *storeUnavailable) Is(target error) bool { return target == usage.ErrUnavailable }
