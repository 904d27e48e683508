package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// NewReconcilersForTest gives the external tests the bundle and status
// reconcilers to call directly, with the manager's cache-backed client. The
// bundle reconciler does not queue status passes: the test runs them.
func NewReconcilersForTest(mgr ctrl.Manager, opts Options) (bundle, status reconcile.Reconciler) {
	outcomes := newOutcomeStore()
	rec := mgr.GetEventRecorder("toolgate-test")
	return &bundleReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(),
			opts: opts.withDefaults(), outcomes: outcomes},
		&statusReconciler{client: mgr.GetClient(), recorder: rec, outcomes: outcomes}
}

// NewClusterPolicyStatusReconcilerForTest gives the external tests a bundle
// reconciler and a ClusterPolicy status reconciler sharing one outcome
// store, to call directly with the manager's cache-backed client.
func NewClusterPolicyStatusReconcilerForTest(mgr ctrl.Manager, opts Options) (bundle, status reconcile.Reconciler) {
	outcomes := newOutcomeStore()
	opts = opts.withDefaults()
	return &bundleReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), opts: opts, outcomes: outcomes},
		&clusterStatusReconciler{client: mgr.GetClient(), outcomes: outcomes, opts: opts,
			writer: &statusReconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorder("toolgate-test")}}
}

// PublishCount reads the publishes counter for one result label.
func PublishCount(result string) float64 {
	return testutil.ToFloat64(publishesTotal.WithLabelValues(result))
}

// BundleGauge reads one per-namespace bundle gauge (policies,
// frozen_agents or rules) without creating the series, and says whether the
// namespace has it.
func BundleGauge(name, ns string) (float64, bool) {
	vec := map[string]*prometheus.GaugeVec{"policies": bundlePolicies, "frozen_agents": bundleFrozenAgents, "rules": bundleRules}[name]
	return namespaceGauge(vec, ns)
}

// namespaceGauge reads the series of vec whose namespace label is ns
// without creating it, and says whether it exists.
func namespaceGauge(vec *prometheus.GaugeVec, ns string) (float64, bool) {
	ch := make(chan prometheus.Metric, 256)
	go func() { vec.Collect(ch); close(ch) }()
	val, found := 0.0, false
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "namespace" && l.GetValue() == ns {
				val, found = d.GetGauge().GetValue(), true
			}
		}
	}
	return val, found
}
