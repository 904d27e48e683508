package sidecar

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/usage"
)

const metricPrefix = "toolgate_sidecar_"

// metrics live in the server's own registry, so two servers in one process
// (tests, the load generator) never collide and /metrics shows only ours.
type metrics struct {
	registry *prometheus.Registry

	decisions          *prometheus.CounterVec
	latency            prometheus.Histogram
	badRequests        prometheus.Counter
	internalErrors     prometheus.Counter
	bundleInfo         *prometheus.GaugeVec
	bundleLoaded       prometheus.Gauge
	lastLoad           prometheus.Gauge
	reloads            prometheus.Counter
	reloadFailures     *prometheus.CounterVec
	rejected           *prometheus.CounterVec
	logDropped         *prometheus.CounterVec
	identityMismatches prometheus.Counter
	// bindingOverrides are by field: bindRoles, bindEnvironment.
	bindingOverrides [2]prometheus.Counter
	listenerUp       *prometheus.GaugeVec
	connsOpen        *prometheus.GaugeVec
	connsEvicted     *prometheus.CounterVec
	connsRefused     *prometheus.CounterVec
	traceTruncated   prometheus.Counter
	// The FrozenAgent watch of a --configmap sidecar.
	frozenWatchUp       prometheus.Gauge
	frozenWatchFailures prometheus.Counter
	apiFrozenAgents     prometheus.Gauge

	// Resolving a labelled child hashes its labels; the common ones are
	// resolved once so the hot path only increments.
	common map[decisionKey]prometheus.Counter
	mu     sync.Mutex // guards bundleInfo's reset-and-set
}

type decisionKey struct {
	decision engine.Decision
	code     engine.Code
	effect   engine.Effect
}

// Indexes of metrics.bindingOverrides.
const (
	bindRoles = iota
	bindEnvironment
)

func newMetrics(age, bodyBytes func() float64, ledger *usage.Ledger) *metrics {
	m := &metrics{registry: prometheus.NewRegistry()}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "decisions_total", Help: "Decisions made, by decision, code (empty: decided by a rule or a default effect) and effect (allow, deny, warn, audit).",
	}, []string{"decision", "code", "effect"})
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: metricPrefix + "decision_duration_seconds", Help: "Time from reading a request to writing its decision.",
		Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3},
	})
	m.badRequests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricPrefix + "bad_requests_total", Help: "Evaluate requests rejected with 400 (malformed or oversize) or 405.",
	})
	m.internalErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricPrefix + "internal_errors_total", Help: "Decisions that failed inside the sidecar and were answered deny INTERNAL_ERROR.",
	})
	m.identityMismatches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricPrefix + "agent_id_overrides_total", Help: "Requests whose agent_id differed from --agent-id and was overridden.",
	})
	overrides := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "binding_overrides_total", Help: "Requests whose roles or environment differed from --roles or --environment and were overridden, by field.",
	}, []string{"field"})
	m.bindingOverrides[bindRoles] = overrides.WithLabelValues("roles")
	m.bindingOverrides[bindEnvironment] = overrides.WithLabelValues("environment")
	usageEvictions := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: metricPrefix + "usage_evictions_total", Help: "Counters of allowed calls (for rateLimit and tokenBudget) forgotten at --usage-max-keys while they still held calls a window reaches: that agent or session counts from zero again.",
	}, func() float64 { return float64(ledger.Evictions()) })
	usageKeys := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricPrefix + "usage_keys", Help: "Counters of allowed calls held, at most --usage-max-keys.",
	}, func() float64 { return float64(ledger.Keys()) })
	m.registry.MustRegister(overrides, usageEvictions, usageKeys)
	m.bundleInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "bundle_info", Help: "The revision of the bundle being served (1 for the current one).",
	}, []string{"revision"})
	m.bundleLoaded = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricPrefix + "bundle_loaded", Help: "1 when a bundle is loaded; 0 means every decision is deny NO_POLICIES.",
	})
	m.lastLoad = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricPrefix + "bundle_last_load_timestamp_seconds", Help: "When the current bundle was loaded (Unix time).",
	})
	bundleAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricPrefix + "bundle_age_seconds", Help: "Seconds since the current bundle was loaded; -1 when none is.",
	}, age)
	bodyInFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricPrefix + "body_bytes_in_flight", Help: "Bytes held by request bodies larger than 64 KiB being read or decided, at most --max-body-bytes-in-flight; past it a request is denied OVERLOADED. Smaller bodies use pooled buffers, one per connection at most, and are not counted.",
	}, bodyBytes)
	m.reloads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricPrefix + "bundle_reloads_total", Help: "Bundles loaded (a new revision swapped in) or unloaded.",
	})
	m.reloadFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "bundle_reload_failures_total", Help: "Bundles rejected (corrupt, unreadable); the last good one kept serving.",
	}, []string{"source"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "bundle_rejected_total", Help: "Bundles refused, by reason (unsigned, unknown_key, bad_signature, bad_endorsement, wrong_namespace, rollback, corrupt, unreadable); the last good one kept serving.",
	}, []string{"reason"})
	m.logDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "decision_log_dropped_total", Help: "Decision log events dropped, by sink and reason.",
	}, []string{"sink", "reason"})
	m.listenerUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "listener_up", Help: "1 while a --listen address is served; 0 while another process holds it (whatever answers there is not toolgate) and it is retried.",
	}, []string{"addr"})
	m.connsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "connections_open", Help: "Connections open, by listener (capped by --max-connections and --metrics-max-connections).",
	}, []string{"listener"})
	m.connsEvicted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "connections_evicted_total", Help: "Connections closed at the connection cap to admit a new one: the one waiting longest without a request being evaluated.",
	}, []string{"listener"})
	m.connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "connections_refused_total", Help: "New connections closed at the connection cap because every open one was being evaluated.",
	}, []string{"listener"})
	m.traceTruncated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricPrefix + "trace_truncated_total", Help: "Explain traces cut short at --max-trace entries.",
	})
	m.frozenWatchUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricPrefix + "frozen_watch_up", Help: "1 while FrozenAgents are watched through the API (--configmap); 0 when the watch fails and only the bundle's freezes are current.",
	})
	m.frozenWatchFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricPrefix + "frozen_watch_failures_total", Help: "Failed lists or watches of FrozenAgents (forbidden, unreachable); each is retried with backoff.",
	})
	m.apiFrozenAgents = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricPrefix + "api_frozen_agents", Help: "FrozenAgents applied from the API watch, beside the bundle's.",
	})
	m.registry.MustRegister(m.frozenWatchUp, m.frozenWatchFailures, m.apiFrozenAgents)
	m.registry.MustRegister(m.decisions, m.latency, m.badRequests, m.internalErrors, m.identityMismatches,
		m.bundleInfo, m.bundleLoaded, m.lastLoad, bundleAge, bodyInFlight, m.reloads, m.reloadFailures, m.rejected, m.logDropped,
		m.listenerUp, m.connsOpen, m.connsEvicted, m.connsRefused, m.traceTruncated,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	m.common = map[decisionKey]prometheus.Counter{}
	for _, k := range []decisionKey{
		{engine.Allow, "", engine.EffectAllow}, {engine.Allow, "", engine.EffectWarn}, {engine.Allow, "", engine.EffectAudit},
		{engine.Deny, "", engine.EffectDeny}, {engine.Deny, engine.CodeNoPolicies, engine.EffectDeny},
		{engine.Deny, engine.CodeAgentFrozen, engine.EffectDeny}, {engine.Deny, engine.CodePolicyCompileError, engine.EffectDeny},
		{engine.Deny, engine.CodeEvalTimeout, engine.EffectDeny}, {engine.Deny, engine.CodeImplicitDeny, engine.EffectDeny},
		{engine.Deny, CodeInternalError, engine.EffectDeny}, {engine.Deny, CodeOverloaded, engine.EffectDeny},
	} {
		m.common[k] = m.decisions.WithLabelValues(string(k.decision), string(k.code), string(k.effect))
	}
	return m
}

func (m *metrics) observeDecision(d engine.Decision, c engine.Code, e engine.Effect, took time.Duration) {
	if ctr, ok := m.common[decisionKey{d, c, e}]; ok {
		ctr.Inc()
	} else {
		m.decisions.WithLabelValues(string(d), string(c), string(e)).Inc()
	}
	m.latency.Observe(took.Seconds())
}

func (m *metrics) setBundle(revision string, loadedAt time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reloads.Inc()
	m.bundleInfo.Reset()
	if revision == "" {
		m.bundleLoaded.Set(0)
		m.lastLoad.Set(0)
		return
	}
	m.bundleInfo.WithLabelValues(revision).Set(1)
	m.bundleLoaded.Set(1)
	m.lastLoad.Set(float64(loadedAt.UnixNano()) / 1e9)
}
