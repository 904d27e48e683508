package sidecar

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/internal/httploop"
	"github.com/toolgate/toolgate/usage"
)

const metricPrefix = "toolgate_sidecar_"

// metrics live in the server's own registry, so two servers in one process
// (tests, the load generator) never collide and /metrics shows only ours.
type metrics struct {
	registry *prometheus.Registry
	// Metrics are the decision core's: decisions, latency, overrides.
	*decide.Metrics

	bundleInfo     *prometheus.GaugeVec
	bundleLoaded   prometheus.Gauge
	lastLoad       prometheus.Gauge
	reloads        prometheus.Counter
	reloadFailures *prometheus.CounterVec
	rejected       *prometheus.CounterVec
	logDropped     *prometheus.CounterVec
	listenerUp     *prometheus.GaugeVec
	connsOpen      *prometheus.GaugeVec
	connsEvicted   *prometheus.CounterVec
	connsRefused   *prometheus.CounterVec
	// The FrozenAgent watch of a --configmap sidecar.
	frozenWatchUp       prometheus.Gauge
	frozenWatchFailures prometheus.Counter
	apiFrozenAgents     prometheus.Gauge

	mu sync.Mutex // guards bundleInfo's reset-and-set
}

func newMetrics(age, bodyBytes func() float64, ledger *usage.Ledger) *metrics {
	m := &metrics{registry: prometheus.NewRegistry()}
	m.Metrics = decide.NewMetrics(m.registry, metricPrefix, ledger)
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
	m.registry.MustRegister(
		m.bundleInfo, m.bundleLoaded, m.lastLoad, bundleAge, bodyInFlight, m.reloads, m.reloadFailures, m.rejected, m.logDropped,
		m.listenerUp, m.connsOpen, m.connsEvicted, m.connsRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	return m
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

// conns are the connection families, for httploop.LimitConns.
func (m *metrics) conns() httploop.ConnMetrics {
	return httploop.ConnMetrics{Open: m.connsOpen, Evicted: m.connsEvicted, Refused: m.connsRefused}
}
