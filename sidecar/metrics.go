package sidecar

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgate/toolgate/bundlesource"
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
	// bundle are the bundle loader's: loads, refusals, the FrozenAgent watch.
	bundle *bundlesource.Metrics

	logDropped   *prometheus.CounterVec
	listenerUp   *prometheus.GaugeVec
	connsOpen    *prometheus.GaugeVec
	connsEvicted *prometheus.CounterVec
	connsRefused *prometheus.CounterVec
	mcpOpen      *prometheus.GaugeVec
	mcpRefused   *prometheus.CounterVec
	leaseWrites  *prometheus.CounterVec
}

func newMetrics(age, bodyBytes func() float64, ledger *usage.Ledger) *metrics {
	m := &metrics{registry: prometheus.NewRegistry()}
	m.Metrics = decide.NewMetrics(m.registry, metricPrefix, ledger)
	m.bundle = bundlesource.NewMetrics(m.registry, metricPrefix)
	bundleAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricPrefix + "bundle_age_seconds", Help: "Seconds since the current bundle was loaded; -1 when none is.",
	}, age)
	bodyInFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricPrefix + "body_bytes_in_flight", Help: "Bytes held by request bodies larger than 64 KiB being read or decided, at most --max-body-bytes-in-flight; past it a request is denied OVERLOADED. Smaller bodies use pooled buffers, one per connection at most, and are not counted.",
	}, bodyBytes)
	m.logDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "decision_log_dropped_total", Help: "Decision log events dropped, by sink and reason.",
	}, []string{"sink", "reason"})
	m.listenerUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "listener_up", Help: "1 while a --listen address is served; 0 while another process holds it (whatever answers there is not toolgate) and it is retried.",
	}, []string{"listener"})
	m.connsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "connections_open", Help: "Connections open, by listener: those for decisions and probes (capped by --max-connections and --metrics-max-connections) and those carrying MCP requests (--max-mcp-connections).",
	}, []string{"listener"})
	m.connsEvicted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "connections_evicted_total", Help: "Connections closed at the connection cap to admit a new one: the one waiting longest without a request being evaluated.",
	}, []string{"listener"})
	m.connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "connections_refused_total", Help: "New connections closed at the connection cap because every open one was being evaluated.",
	}, []string{"listener"})
	m.mcpOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "mcp_connections_open", Help: "Connections that carry MCP proxy requests (streams included), by listener, at most --max-mcp-connections: held apart from --max-connections.",
	}, []string{"listener"})
	m.mcpRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "mcp_connections_refused_total", Help: "MCP requests answered 503 because --max-mcp-connections connections each had a request or stream in flight.",
	}, []string{"listener"})
	m.leaseWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "lease_writes_total", Help: "Writes of the sidecar's Lease (--lease-pod), by result: created, updated, error. An error changes no decision; the operator counts the sidecar unreporting until a write succeeds.",
	}, []string{"result"})
	m.registry.MustRegister(
		bundleAge, bodyInFlight, m.logDropped, m.leaseWrites,
		m.listenerUp, m.connsOpen, m.connsEvicted, m.connsRefused, m.mcpOpen, m.mcpRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	return m
}

// conns are the connection families, for httploop.LimitConns.
func (m *metrics) conns() httploop.ConnMetrics {
	return httploop.ConnMetrics{Open: m.connsOpen, Evicted: m.connsEvicted, Refused: m.connsRefused,
		StreamsOpen: m.mcpOpen, StreamsRefused: m.mcpRefused}
}
