package decide

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/usage"
)

// Metrics are the decisions' families, registered by NewMetrics into the
// sidecar's own registry beside its bundle and connection metrics.
type Metrics struct {
	Decisions          *prometheus.CounterVec
	Latency            prometheus.Histogram
	BadRequests        prometheus.Counter
	InternalErrors     prometheus.Counter
	IdentityMismatches prometheus.Counter
	// BindingOverrides are by field: bindRoles, bindEnvironment.
	BindingOverrides [2]prometheus.Counter
	TraceTruncated   prometheus.Counter
	// Shadow counts what Audit policies would have decided, by policy
	// (its name) and decision.
	Shadow *prometheus.CounterVec

	// Resolving a labelled child hashes its labels; the common ones are
	// resolved once so the hot path only increments.
	Common map[DecisionKey]prometheus.Counter
}

// DecisionKey is one child of Metrics.Decisions.
type DecisionKey struct {
	Decision engine.Decision
	Code     engine.Code
	Effect   engine.Effect
}

// Indexes of Metrics.BindingOverrides.
const (
	bindRoles = iota
	bindEnvironment
)

// NewMetrics makes the decision metrics, named prefix + ..., with the usage
// ledger's, and registers them in reg.
func NewMetrics(reg prometheus.Registerer, prefix string, ledger *usage.Ledger) *Metrics {
	m := &Metrics{}
	m.Decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prefix + "decisions_total", Help: "Decisions made, by decision, code (empty: decided by a rule or a default effect) and effect (allow, deny, warn, audit).",
	}, []string{"decision", "code", "effect"})
	m.Latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: prefix + "decision_duration_seconds", Help: "Time from reading a request to writing its decision.",
		Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3},
	})
	m.BadRequests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: prefix + "bad_requests_total", Help: "Evaluate requests rejected with 400 (malformed or oversize) or 405.",
	})
	m.InternalErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: prefix + "internal_errors_total", Help: "Decisions that failed inside the sidecar and were answered deny INTERNAL_ERROR.",
	})
	m.IdentityMismatches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: prefix + "agent_id_overrides_total", Help: "Requests whose agent_id differed from --agent-id and was overridden.",
	})
	overrides := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prefix + "binding_overrides_total", Help: "Requests whose roles or environment differed from --roles or --environment and were overridden, by field.",
	}, []string{"field"})
	m.BindingOverrides[bindRoles] = overrides.WithLabelValues("roles")
	m.BindingOverrides[bindEnvironment] = overrides.WithLabelValues("environment")
	usageEvictions := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: prefix + "usage_evictions_total", Help: "Counters of allowed calls (for rateLimit and tokenBudget) forgotten at --usage-max-keys while they still held calls a limit's window reaches: only session counters, for their agent's share; a limit reading one is denied USAGE_UNAVAILABLE until its window has passed.",
	}, func() float64 { return float64(ledger.Evictions()) })
	usageKeys := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: prefix + "usage_keys", Help: "Counters of allowed calls held, at most --usage-max-keys.",
	}, func() float64 { return float64(ledger.Keys()) })
	m.TraceTruncated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: prefix + "trace_truncated_total", Help: "Explain traces cut short at --max-trace entries.",
	})
	m.Shadow = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prefix + "shadow_decisions_total", Help: "What Audit (shadow mode) policies would have decided on their own, by policy and decision; they never change a decision.",
	}, []string{"policy", "decision"})
	reg.MustRegister(overrides, usageEvictions, usageKeys, m.Decisions, m.Latency, m.BadRequests, m.InternalErrors,
		m.IdentityMismatches, m.TraceTruncated, m.Shadow)

	m.Common = map[DecisionKey]prometheus.Counter{}
	for _, k := range []DecisionKey{
		{engine.Allow, "", engine.EffectAllow}, {engine.Allow, "", engine.EffectWarn}, {engine.Allow, "", engine.EffectAudit},
		{engine.Deny, "", engine.EffectDeny}, {engine.Deny, engine.CodeNoPolicies, engine.EffectDeny},
		{engine.Deny, engine.CodeAgentFrozen, engine.EffectDeny}, {engine.Deny, engine.CodePolicyCompileError, engine.EffectDeny},
		{engine.Deny, engine.CodeEvalTimeout, engine.EffectDeny}, {engine.Deny, engine.CodeImplicitDeny, engine.EffectDeny},
		{engine.Deny, CodeInternalError, engine.EffectDeny}, {engine.Deny, CodeOverloaded, engine.EffectDeny},
		{engine.Deny, CodeUsageUnavailable, engine.EffectDeny},
	} {
		m.Common[k] = m.Decisions.WithLabelValues(string(k.Decision), string(k.Code), string(k.Effect))
	}
	return m
}

func (m *Metrics) observeDecision(d engine.Decision, c engine.Code, e engine.Effect, took time.Duration) {
	if ctr, ok := m.Common[DecisionKey{d, c, e}]; ok {
		ctr.Inc()
	} else {
		m.Decisions.WithLabelValues(string(d), string(c), string(e)).Inc()
	}
	m.Latency.Observe(took.Seconds())
}

// observeShadow counts each Audit policy's verdict.
func (m *Metrics) observeShadow(shadow []engine.ShadowVerdict) {
	for i := range shadow {
		m.Shadow.WithLabelValues(shadow[i].Policy, string(shadow[i].Decision)).Inc()
	}
}
