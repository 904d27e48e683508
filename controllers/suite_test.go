package controllers_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/manager"
)

// One control plane for the whole package; each test works in namespaces of
// its own and runs its own manager scoped to them.
var (
	restCfg *rest.Config
	k8s     client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, func(s testenv.Suite) { restCfg, k8s = s.Config, s.Client }))
}

// testManager is a running manager and the number of writes (any request
// but GET, LIST and WATCH) it has sent to the API server.
type testManager struct {
	ctrl.Manager
	stop   func()
	writes *atomic.Int64
}

// startManager runs the real manager, built by manager.New as `toolgate
// manager` builds it, watching only the given namespaces. It stops when the
// test ends.
func startManager(t *testing.T, opts controllers.Options, namespaces ...string) *testManager {
	t.Helper()
	opts.SkipNameValidation = true
	if opts.ConfigMapName == "" {
		opts.ConfigMapName = bundle.DefaultConfigMapName
	}
	writes := new(atomic.Int64)
	cfg := rest.CopyConfig(restCfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet {
				writes.Add(1)
			}
			return rt.RoundTrip(req)
		})
	}
	mgr, err := manager.New(cfg, manager.Options{
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		Namespaces:             namespaces,
		Controller:             opts,
	})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager stopped with: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("manager cache did not sync")
	}
	return &testManager{Manager: mgr, stop: stop, writes: writes}
}

// reconciles counts a controller's completed reconciles with the given result
// (success, error, requeue_after...), from controller-runtime's own metrics.
func reconciles(t *testing.T, controller, result string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["controller"] == controller && labels["result"] == result {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func getBundleConfigMap(t *testing.T, ns string) (*corev1.ConfigMap, bool) {
	t.Helper()
	var cm corev1.ConfigMap
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("getting bundle ConfigMap: %v", err)
	}
	return &cm, true
}

// policy builds a Policy of n rules: rule i denies tool_i when
// input.command contains danger_i.
func policy(ns, name string, n int) *v1alpha1.Policy { return policyRange(ns, name, 0, n) }

// policyRange builds the rules from (inclusive) to to (exclusive).
func policyRange(ns, name string, from, to int) *v1alpha1.Policy {
	p := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PolicySpec{DefaultEffect: v1alpha1.EffectAllow}}
	for i := from; i < to; i++ {
		p.Spec.Rules = append(p.Spec.Rules, v1alpha1.Rule{
			ID: fmt.Sprintf("r%d", i), Effect: v1alpha1.RuleDeny, Description: fmt.Sprintf("no danger %d", i),
			Conditions: []v1alpha1.Condition{
				{Field: "tool_name", Operator: "eq", Value: jsonValue(fmt.Sprintf("%q", fmt.Sprintf("tool_%d", i)))},
				{Field: "input.command", Operator: "contains", Value: jsonValue(fmt.Sprintf("%q", fmt.Sprintf("danger_%d", i)))},
			},
		})
	}
	return p
}

func jsonValue(raw string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(raw)} }

func frozenAgent(ns, name, agent string, expiresAt *time.Time) *v1alpha1.FrozenAgent {
	f := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.FrozenAgentSpec{AgentID: agent, Reason: "incident 42"}}
	if expiresAt != nil {
		mt := metav1.NewTime(*expiresAt)
		f.Spec.ExpiresAt = &mt
	}
	return f
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func remove(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Delete(context.Background(), obj); err != nil {
		t.Fatalf("deleting %T %s: %v", obj, obj.GetName(), err)
	}
}

// readyOf returns an object's Ready condition, or nil.
func readyOf(conds []metav1.Condition) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == v1alpha1.ConditionReady {
			return &conds[i]
		}
	}
	return nil
}

// waitForPolicyReady waits for the Policy's Ready condition to have reason
// and to describe its current generation; it returns the Policy.
func waitForPolicyReady(t *testing.T, ns, name, reason string) *v1alpha1.Policy {
	t.Helper()
	var p v1alpha1.Policy
	testenv.Eventually(t, fmt.Sprintf("Policy %s Ready reason %s", name, reason), func() (bool, string) {
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
			return false, err.Error()
		}
		c := readyOf(p.Status.Conditions)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason && c.ObservedGeneration == p.Generation,
			fmt.Sprintf("Ready=%s reason %s (generation %d, condition observed %d)", c.Status, c.Reason, p.Generation, c.ObservedGeneration)
	})
	return &p
}

func waitForFrozenReady(t *testing.T, ns, name, reason string) *v1alpha1.FrozenAgent {
	t.Helper()
	var f v1alpha1.FrozenAgent
	testenv.Eventually(t, fmt.Sprintf("FrozenAgent %s Ready reason %s", name, reason), func() (bool, string) {
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &f); err != nil {
			return false, err.Error()
		}
		c := readyOf(f.Status.Conditions)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason, fmt.Sprintf("Ready=%s reason %s", c.Status, c.Reason)
	})
	return &f
}

// waitForEvent waits for an events.k8s.io event about the named object.
func waitForEvent(t *testing.T, ns, regarding, eventType, reason string) *eventsv1.Event {
	t.Helper()
	var found *eventsv1.Event
	testenv.Eventually(t, fmt.Sprintf("%s event %s on %s", eventType, reason, regarding), func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for i := range list.Items {
			e := &list.Items[i]
			seen = append(seen, e.Regarding.Name+"/"+e.Reason)
			if e.Regarding.Name == regarding && e.Type == eventType && e.Reason == reason {
				found = e
				return true, ""
			}
		}
		return false, "events: " + strings.Join(seen, ", ")
	})
	return found
}

// randomText defeats compression: 6 bits of entropy per character.
func randomText(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
