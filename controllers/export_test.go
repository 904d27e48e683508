package controllers

import (
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// NewReconcilersForTest gives the external tests the bundle and status
// reconcilers to call directly, with the manager's cache-backed client. The
// bundle reconciler does not queue status passes: the test runs them.
func NewReconcilersForTest(mgr ctrl.Manager, opts Options) (bundle, status reconcile.Reconciler) {
	outcomes := newOutcomeStore()
	rec := mgr.GetEventRecorder("toolgate-test")
	return &bundleReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), recorder: rec,
			opts: opts.withDefaults(), outcomes: outcomes},
		&statusReconciler{client: mgr.GetClient(), recorder: rec, outcomes: outcomes}
}

// PublishCount reads the publishes counter for one result label.
func PublishCount(result string) float64 {
	return testutil.ToFloat64(publishesTotal.WithLabelValues(result))
}
