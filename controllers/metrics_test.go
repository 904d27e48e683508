package controllers_test

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The per-namespace gauges follow what is published, and go away with the
// bundle.
func TestBundleGaugesFollowTheNamespace(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)
	create(t, policy(ns, "a", 3))
	create(t, policy(ns, "b", 2))
	create(t, frozenAgent(ns, "freeze-eve", "eve", nil))
	gauges := func() string {
		p, _ := controllers.BundleGauge("policies", ns)
		f, _ := controllers.BundleGauge("frozen_agents", ns)
		r, _ := controllers.BundleGauge("rules", ns)
		return fmt.Sprintf("policies=%v frozen_agents=%v rules=%v", p, f, r)
	}
	testenv.Eventually(t, "gauges of 2 policies, 5 rules, 1 freeze", func() (bool, string) {
		g := gauges()
		return g == "policies=2 frozen_agents=1 rules=5", g
	})
	ctx := context.Background()
	for _, obj := range []client.Object{&v1alpha1.Policy{}, &v1alpha1.FrozenAgent{}} {
		if err := k8s.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "no series for a namespace without a bundle", func() (bool, string) {
		_, p := controllers.BundleGauge("policies", ns)
		_, f := controllers.BundleGauge("frozen_agents", ns)
		_, r := controllers.BundleGauge("rules", ns)
		return !p && !f && !r, gauges()
	})
}
