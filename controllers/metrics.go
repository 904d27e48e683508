package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Publish results, the values of the publishes counter's result label.
const (
	resultPublished = "published"
	resultUnchanged = "unchanged"
	resultTooLarge  = "too_large"
	resultFailed    = "failed"
	resultDeleted   = "deleted"
)

// Registered once per process in controller-runtime's registry, which the
// manager serves on its metrics endpoint next to the reconcile metrics.
var (
	bundleSizeBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolgate_bundle_size_bytes",
		Help: "Bytes stored in a namespace's bundle ConfigMap (compressed when gzipped).",
	}, []string{"namespace"})
	bundleRules = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolgate_bundle_rules",
		Help: "Rules in a namespace's published bundle.",
	}, []string{"namespace"})
	bundlePolicies = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolgate_bundle_policies",
		Help: "Policies in a namespace's published bundle.",
	}, []string{"namespace"})
	bundleFrozenAgents = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolgate_bundle_frozen_agents",
		Help: "Agents frozen in a namespace's published bundle (an alert on > 0 tells who is stopped).",
	}, []string{"namespace"})
	compileErrors = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolgate_bundle_compile_errors",
		Help: "Compile diagnostics in a namespace's bundle; those policies deny POLICY_COMPILE_ERROR.",
	}, []string{"namespace"})
	publishesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_bundle_publishes_total",
		Help: "Bundle reconciles by result: published, unchanged, too_large, failed, deleted.",
	}, []string{"result"})
	publishSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "toolgate_bundle_publish_duration_seconds",
		Help:    "Time from the start of a reconcile to the bundle ConfigMap write that it caused.",
		Buckets: prometheus.ExponentialBuckets(0.002, 2, 14),
	})
)

var registerMetricsOnce sync.Once

// registerMetrics adds the operator's collectors to controller-runtime's
// registry; Setup calls it, so a program that only imports this package
// (for its types) does not register them.
func registerMetrics() {
	registerMetricsOnce.Do(func() {
		metrics.Registry.MustRegister(bundleSizeBytes, bundleRules, bundlePolicies, bundleFrozenAgents,
			compileErrors, publishesTotal, publishSeconds)
		// Every result exists from the start, at 0: an alert on
		// increase(...{result="failed"}) then sees the first failure.
		for _, r := range []string{resultPublished, resultUnchanged, resultTooLarge, resultFailed, resultDeleted} {
			publishesTotal.WithLabelValues(r)
		}
		registerApprovalMetrics(metrics.Registry)
	})
}

// forgetNamespace drops the per-namespace series of a namespace that no
// longer has a bundle.
func forgetNamespace(ns string) {
	bundleSizeBytes.DeleteLabelValues(ns)
	bundleRules.DeleteLabelValues(ns)
	bundlePolicies.DeleteLabelValues(ns)
	bundleFrozenAgents.DeleteLabelValues(ns)
	compileErrors.DeleteLabelValues(ns)
}
