package sidecar

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
}

func newMCPRequests(reg *prometheus.Registry) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "mcp_requests_total",
		Help: "Client POSTs to the MCP proxy, by upstream and outcome: forwarded, denied (a tools/call in it was denied or could not be decided; answered by the proxy), refused (400/413); and upstream_error, any request the upstream did not answer.",
	}, []string{"upstream", "outcome"})
	reg.MustRegister(v)
	return v
}

func (v mcpRequestsVec) counters(upstream string) mcpCounters {
	return mcpCounters{
		forwarded: v.WithLabelValues(upstream, mcpForwarded), denied: v.WithLabelValues(upstream, mcpDenied),
		refused: v.WithLabelValues(upstream, mcpRefused), upstreamError: v.WithLabelValues(upstream, mcpUpstreamError),
	}
}

type mcpRequestsVec struct{ *prometheus.CounterVec }
