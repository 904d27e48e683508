package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

// testOptions run a manager that can share the process with others.
func testOptions(namespaces ...string) Options {
	o := DefaultOptions()
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	o.Webhooks.Enabled = false // the webhook suite covers them; no configuration is installed here
	o.Namespaces = namespaces
	o.Controller.SkipNameValidation = true
	return o
}

// runInBackground starts Run; the returned function stops it and returns its
// error.
func runInBackground(t *testing.T, o Options) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	var result error
	stopped := false
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func createPolicy(t *testing.T, ns, name string) {
	t.Helper()
	p := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PolicySpec{Rules: []v1alpha1.Rule{{ID: "r", Effect: v1alpha1.RuleDeny}}}}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func TestRunServesProbesAndMetricsAndPublishes(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "mgr-")
	o := testOptions(ns)
	o.Kubeconfig = testenv.WriteKubeconfig(t, kubeconfig)
	o.HealthProbeBindAddress, o.MetricsBindAddress = testenv.FreeLoopbackAddr(t), testenv.FreeLoopbackAddr(t)
	o.Controller.ConfigMapName = "custom-bundle"
	stop := runInBackground(t, o)

	probe := "http://" + o.HealthProbeBindAddress
	for _, path := range []string{"/readyz", "/healthz"} {
		testenv.Eventually(t, path, func() (bool, string) {
			code, body, err := get(probe + path)
			return code == http.StatusOK, fmt.Sprint(code, body, err)
		})
	}
	if code, _, _ := get(probe + "/no-such-probe"); code != http.StatusNotFound {
		t.Errorf("unknown probe path: HTTP %d", code)
	}

	createPolicy(t, ns, "p")
	testenv.WaitForBundle(t, k8s, ns, "custom-bundle", "bundle ConfigMap in "+ns, nil)
	testenv.Eventually(t, "metrics", func() (bool, string) {
		code, body, err := get("http://" + o.MetricsBindAddress + "/metrics")
		for _, want := range []string{
			fmt.Sprintf(`toolgate_bundle_size_bytes{namespace=%q}`, ns),
			`toolgate_bundle_publishes_total{result="published"}`,
			`toolgate_bundle_publish_duration_seconds_bucket`,
			fmt.Sprintf(`toolgate_bundle_compile_errors{namespace=%q} 0`, ns),
			`controller_runtime_reconcile_total{controller="toolgate-bundle"`,
		} {
			if !strings.Contains(body, want) {
				return false, fmt.Sprintf("HTTP %d %v: no %s", code, err, want)
			}
		}
		return true, ""
	})
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v after its context ended", err)
	}
}

func TestRunHonoursKUBECONFIG(t *testing.T) {
	t.Setenv("KUBECONFIG", testenv.WriteKubeconfig(t, kubeconfig))
	ns := testenv.Namespace(t, k8s, "mgr-")
	runInBackground(t, testOptions(ns))
	createPolicy(t, ns, "p")
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "bundle ConfigMap in "+ns, nil)
}

func TestRunFailsOnUnusableConfiguration(t *testing.T) {
	o := testOptions()
	o.Kubeconfig = testenv.WriteKubeconfig(t, []byte("this: is: not a kubeconfig"))
	if err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("garbage kubeconfig: %v", err)
	}
	o = testOptions()
	o.Namespaces = []string{"Not A Namespace"}
	if err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--namespaces") {
		t.Errorf("bad namespace: %v", err)
	}
}

func TestNamespacesLimitWhatIsWatched(t *testing.T) {
	a, b := testenv.Namespace(t, k8s, "mgr-"), testenv.Namespace(t, k8s, "mgr-")
	mgr, err := New(restCfg, testOptions(a))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	mgr.GetCache().WaitForCacheSync(ctx)
	var list v1alpha1.PolicyList
	if err := mgr.GetClient().List(ctx, &list, client.InNamespace(a)); err != nil {
		t.Fatalf("listing the watched namespace: %v", err)
	}
	if err := mgr.GetClient().List(ctx, &list, client.InNamespace(b)); err == nil {
		t.Fatal("the manager's cache serves a namespace it was told not to watch")
	}
}

func TestLeaderElection(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "mgr-")
	o := testOptions(ns)
	o.Kubeconfig = testenv.WriteKubeconfig(t, kubeconfig)
	o.LeaderElect, o.LeaderElectionNamespace = true, ns
	stop := runInBackground(t, o)
	createPolicy(t, ns, "p")
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "bundle ConfigMap in "+ns, nil) // only the leader publishes
	var lease coordinationv1.Lease
	key := types.NamespacedName{Namespace: ns, Name: LeaderElectionID}
	if err := k8s.Get(context.Background(), key, &lease); err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("lease %+v, %v", lease.Spec, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Released on the way out, so a new replica takes over at once.
	if err := k8s.Get(context.Background(), key, &lease); err != nil || (lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "") {
		t.Fatalf("lease after stop: %+v, %v", lease.Spec, err)
	}
}

func TestExtensionsRunAndTheirErrorsStopNew(t *testing.T) {
	called := false
	o := testOptions()
	o.Extensions = []Extension{func(mgr ctrl.Manager) error { called = mgr != nil; return nil }}
	if _, err := New(restCfg, o); err != nil || !called {
		t.Fatalf("New: %v, extension called: %v", err, called)
	}
	o.Extensions = append(o.Extensions, func(ctrl.Manager) error { return errors.New("webhook port taken") })
	if _, err := New(restCfg, o); err == nil || !strings.Contains(err.Error(), "webhook port taken") {
		t.Fatalf("a failing extension: %v", err)
	}
}
