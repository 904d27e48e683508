package bundlesource

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the bundle's families, registered by NewMetrics into the
// sidecar's own registry beside its decision and connection metrics.
type Metrics struct {
	BundleInfo     *prometheus.GaugeVec
	BundleLoaded   prometheus.Gauge
	LastLoad       prometheus.Gauge
	Reloads        prometheus.Counter
	ReloadFailures *prometheus.CounterVec
	Rejected       *prometheus.CounterVec
	// The FrozenAgent watch of a --configmap sidecar.
	FrozenWatchUp       prometheus.Gauge
	FrozenWatchFailures prometheus.Counter
	APIFrozenAgents     prometheus.Gauge
	// The ClusterFrozenAgent watch of a --configmap sidecar.
	ClusterFrozenWatchUp       prometheus.Gauge
	ClusterFrozenWatchFailures prometheus.Counter
	APIClusterFrozenAgents     prometheus.Gauge

	mu sync.Mutex // guards BundleInfo's reset-and-set
}

// NewMetrics makes the bundle metrics, named prefix + ..., and registers
// them in reg.
func NewMetrics(reg prometheus.Registerer, prefix string) *Metrics {
	m := &Metrics{}
	m.BundleInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: prefix + "bundle_info", Help: "The revision of the bundle being served (1 for the current one).",
	}, []string{"revision"})
	m.BundleLoaded = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: prefix + "bundle_loaded", Help: "1 when a bundle is loaded; 0 means every decision is deny NO_POLICIES.",
	})
	m.LastLoad = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: prefix + "bundle_last_load_timestamp_seconds", Help: "When the current bundle was loaded (Unix time).",
	})
	m.Reloads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: prefix + "bundle_reloads_total", Help: "Bundles loaded (a new revision swapped in) or unloaded.",
	})
	m.ReloadFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prefix + "bundle_reload_failures_total", Help: "Bundles rejected (corrupt, unreadable); the last good one kept serving.",
	}, []string{"source"})
	m.Rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prefix + "bundle_rejected_total", Help: "Bundles refused, by reason (unsigned, unknown_key, bad_signature, bad_endorsement, wrong_namespace, rollback, corrupt, unreadable, and for a chunked bundle bad_index, missing_part, part_mismatch); the last good one kept serving.",
	}, []string{"reason"})
	m.FrozenWatchUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: prefix + "frozen_watch_up", Help: "1 while FrozenAgents are watched through the API (--configmap); 0 when the watch fails and only the bundle's freezes are current.",
	})
	m.FrozenWatchFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: prefix + "frozen_watch_failures_total", Help: "Failed lists or watches of FrozenAgents (forbidden, unreachable); each is retried with backoff.",
	})
	m.APIFrozenAgents = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: prefix + "api_frozen_agents", Help: "FrozenAgents applied from the API watch, beside the bundle's.",
	})
	m.ClusterFrozenWatchUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: prefix + "cluster_frozen_watch_up", Help: "1 while ClusterFrozenAgents are watched through the API (--configmap); 0 when the watch fails and only the bundle's freezes and the ClusterFrozenAgents last seen apply.",
	})
	m.ClusterFrozenWatchFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: prefix + "cluster_frozen_watch_failures_total", Help: "Failed lists or watches of ClusterFrozenAgents (forbidden, unreachable); each is retried with backoff.",
	})
	m.APIClusterFrozenAgents = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: prefix + "api_cluster_frozen_agents", Help: "ClusterFrozenAgents from the API watch that select this namespace (all of them while the bundle carries no namespace labels).",
	})
	reg.MustRegister(m.FrozenWatchUp, m.FrozenWatchFailures, m.APIFrozenAgents,
		m.ClusterFrozenWatchUp, m.ClusterFrozenWatchFailures, m.APIClusterFrozenAgents,
		m.BundleInfo, m.BundleLoaded, m.LastLoad, m.Reloads, m.ReloadFailures, m.Rejected)
	// Every series an alert may watch exists from the start, at 0, so that
	// increase() sees the first failure rather than a series born at 1.
	for _, o := range []string{OriginConfigMap, OriginBundleDir, OriginBundleFile, OriginCache, OriginAPI} {
		m.ReloadFailures.WithLabelValues(o)
	}
	for _, r := range []string{ReasonUnsigned, ReasonUnknownKey, ReasonBadSignature, ReasonWrongNamespace,
		ReasonBadEndorsement, ReasonRollback, ReasonCorrupt, ReasonUnreadable, ReasonBadIndex, ReasonMissingPart, ReasonPartMismatch} {
		m.Rejected.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) setBundle(revision string, loadedAt time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Reloads.Inc()
	m.BundleInfo.Reset()
	if revision == "" {
		m.BundleLoaded.Set(0)
		m.LastLoad.Set(0)
		return
	}
	m.BundleInfo.WithLabelValues(revision).Set(1)
	m.BundleLoaded.Set(1)
	m.LastLoad.Set(float64(loadedAt.UnixNano()) / 1e9)
}
