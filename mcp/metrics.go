package mcp

import "github.com/prometheus/client_golang/prometheus"

// What became of each client POST to the MCP proxy (calls are also counted
// as decisions, in toolgate_sidecar_decisions_total).
const (
	mcpForwarded     = "forwarded"      // sent upstream (every call in it allowed)
	mcpDenied        = "denied"         // answered by the proxy: a call in it was denied
	mcpRefused       = "refused"        // 400/413: unreadable, ambiguous, headers disagreeing, too big
	mcpUpstreamError = "upstream_error" // the upstream did not answer
)

// mcpCounters are one upstream's children of
// toolgate_sidecar_mcp_requests_total, resolved once.
type mcpCounters struct {
	forwarded, denied, refused, upstreamError prometheus.Counter
	// schemasListed and schemaListFailed count the proxy's own tools/list
	// requests (params_learn.go).
	schemasListed, schemaListFailed prometheus.Counter
	// held times the forwarded POSTs' way through the proxy (mcpInfo.sent).
	held prometheus.Observer
}

// mcpMetrics are the MCP proxy's metric families; counters resolves one
// upstream's children.
type mcpMetrics struct {
	requests, schemaLists *prometheus.CounterVec
	held                  *prometheus.HistogramVec
}

// newMCPMetrics makes and registers the MCP proxy's metrics.
// mcp_held_seconds is what the proxy adds to a call on its way in, so an
// operator can tell it from the upstream's own time without a second
// measurement; its buckets are finer than decision_duration_seconds' below
// 200 µs, where a forwarded call's time is.
// metricPrefix is the sidecar's: the proxy's families are the sidecar's.
const metricPrefix = "toolgate_sidecar_"

func newMCPMetrics(reg prometheus.Registerer) mcpMetrics {
	m := mcpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "mcp_requests_total",
			Help: "Client POSTs to the MCP proxy, by upstream and outcome: forwarded, denied (a tools/call in it was denied or could not be decided; answered by the proxy), refused (400/413); and upstream_error, any request the upstream did not answer.",
		}, []string{"upstream", "outcome"}),
		schemaLists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "mcp_schema_lists_total",
			Help: "tools/list requests the MCP proxy made itself, to learn a tool's schema for a call's Mcp-Param-* headers, by upstream and outcome (listed, failed).",
		}, []string{"upstream", "outcome"}),
		held: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricPrefix + "mcp_held_seconds",
			Help:    "Time the MCP proxy held each POST it forwarded, by upstream: reading, checking and deciding it, from its first byte read (its handler starting, on the Unix socket) to its last byte written upstream (to its handing to the HTTP transport, for https and HTTP_PROXY upstreams). The upstream's time is not in it.",
			Buckets: []float64{10e-6, 20e-6, 30e-6, 40e-6, 50e-6, 75e-6, 100e-6, 150e-6, 200e-6, 300e-6, 500e-6, 1e-3, 2.5e-3, 10e-3, 100e-3},
		}, []string{"upstream"}),
	}
	reg.MustRegister(m.requests, m.schemaLists, m.held)
	return m
}

func (m mcpMetrics) counters(upstream string) mcpCounters {
	r := m.requests
	return mcpCounters{
		forwarded: r.WithLabelValues(upstream, mcpForwarded), denied: r.WithLabelValues(upstream, mcpDenied),
		refused: r.WithLabelValues(upstream, mcpRefused), upstreamError: r.WithLabelValues(upstream, mcpUpstreamError),
		schemasListed: m.schemaLists.WithLabelValues(upstream, "listed"), schemaListFailed: m.schemaLists.WithLabelValues(upstream, "failed"),
		held: m.held.WithLabelValues(upstream),
	}
}
