// Command latency measures how long a change takes to reach the bundle: on a
// real kube-apiserver and etcd (envtest), with the real manager, it applies
// Policy changes and creates FrozenAgents one by one and times each from the
// API write to the watch event of the bundle ConfigMap carrying it.
//
//	KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh | tail -n 1) go run ./test/latency
//
// It exits non-zero when a p99 is over -target-p99.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/manager"
)

type config struct {
	policyChanges   int
	freezes         int
	backgroundRules int
	targetP99       time.Duration
	timeout         time.Duration
	verbose         bool
}

func main() {
	var c config
	flag.IntVar(&c.policyChanges, "policy-changes", 100, "Policy updates to time, one by one")
	flag.IntVar(&c.freezes, "freezes", 100, "FrozenAgents to create and time, one by one")
	flag.IntVar(&c.backgroundRules, "background-rules", 500, "rules in other Policies of the namespace (100 per Policy)")
	flag.DurationVar(&c.targetP99, "target-p99", 500*time.Millisecond, "fail when a p99 is above this")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Second, "give up on one change after this long")
	flag.BoolVar(&c.verbose, "v", false, "log the manager to stderr")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if c.verbose {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	env, cfg, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1 // the driver must not throttle itself

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k8s, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "latency-"}}
	if err := k8s.Create(ctx, nsObj); err != nil {
		return err
	}
	ns := nsObj.Name

	mgr, err := manager.New(cfg, manager.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		Namespaces: []string{ns}, Controller: controllers.Options{ConfigMapName: bundle.DefaultConfigMapName}})
	if err != nil {
		return err
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()

	bundles, err := watchBundle(ctx, cfg, ns)
	if err != nil {
		return err
	}
	w := &waiter{bundles: bundles, timeout: c.timeout}

	for i := 0; i < c.backgroundRules/100; i++ {
		if err := k8s.Create(ctx, policy(ns, fmt.Sprintf("background-%d", i), 100, "")); err != nil {
			return err
		}
	}
	measured := policy(ns, "measured", 20, "marker-initial")
	if err := k8s.Create(ctx, measured); err != nil {
		return err
	}
	if _, err := w.until(time.Now(), func(b engine.Bundle) bool { return len(b.Policies) == c.backgroundRules/100+1 }); err != nil {
		return fmt.Errorf("initial bundle: %w", err)
	}

	var policyLat, freezeLat []time.Duration
	for i := range c.policyChanges {
		marker := fmt.Sprintf("marker-%d", i)
		patch := client.MergeFrom(measured.DeepCopy())
		measured.Spec.Rules[0].Conditions[0].Value = jsonString(marker)
		start := time.Now()
		if err := k8s.Patch(ctx, measured, patch); err != nil {
			return err
		}
		d, err := w.until(start, func(b engine.Bundle) bool { return carriesMarker(b, marker) })
		if err != nil {
			return fmt.Errorf("policy change %d: %w", i, err)
		}
		policyLat = append(policyLat, d)
	}
	for i := range c.freezes {
		agent := fmt.Sprintf("agent-%d", i)
		f := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "freeze-" + agent},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: agent, Reason: "latency run"}}
		start := time.Now()
		if err := k8s.Create(ctx, f); err != nil {
			return err
		}
		d, err := w.until(start, func(b engine.Bundle) bool {
			return slices.ContainsFunc(b.FrozenAgents, func(f engine.FrozenAgent) bool { return f.ID == agent })
		})
		if err != nil {
			return fmt.Errorf("freeze %d: %w", i, err)
		}
		freezeLat = append(freezeLat, d)
	}
	cancel()
	if err := <-mgrDone; err != nil {
		return fmt.Errorf("manager: %w", err)
	}

	fmt.Printf("namespace: %d background rules in %d Policies, a 20-rule Policy changed, then up to %d FrozenAgents\n",
		c.backgroundRules/100*100, c.backgroundRules/100, c.freezes)
	fmt.Println("API write -> bundle ConfigMap watch event carrying the change:")
	var failed []string
	for _, s := range []struct {
		name string
		lat  []time.Duration
	}{{"policy changes", policyLat}, {"frozen agents", freezeLat}, {"all", append(slices.Clone(policyLat), freezeLat...)}} {
		if len(s.lat) == 0 {
			continue
		}
		st := summarize(s.lat)
		fmt.Printf("  %-15s n=%-4d p50=%-9s p90=%-9s p99=%-9s max=%-9s mean=%s\n", s.name, len(s.lat),
			st.p50.Round(100*time.Microsecond), st.p90.Round(100*time.Microsecond), st.p99.Round(100*time.Microsecond),
			st.max.Round(100*time.Microsecond), st.mean.Round(100*time.Microsecond))
		if st.p99 > c.targetP99 {
			failed = append(failed, fmt.Sprintf("%s p99 %s > %s", s.name, st.p99, c.targetP99))
		}
	}
	fmt.Println("where the time goes (controller-runtime and toolgate metrics):")
	if err := printReconcileMetrics(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	fmt.Printf("target p99 <= %s: met\n", c.targetP99)
	return nil
}

// observed is one bundle seen on the watch, and when.
type observed struct {
	at     time.Time
	bundle engine.Bundle
}

// watchBundle streams the namespace's bundle as the sidecar's --configmap
// mode sees it: an informer on that one ConfigMap.
func watchBundle(ctx context.Context, cfg *rest.Config, ns string) (<-chan observed, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	out := make(chan observed, 4096)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", bundle.DefaultConfigMapName).String()
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	push := func(obj any) {
		at := time.Now()
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		b, err := decode(cm)
		if err != nil {
			fmt.Fprintln(os.Stderr, "latency: undecodable bundle:", err)
			return
		}
		out <- observed{at: at, bundle: b}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    push,
		UpdateFunc: func(_, obj any) { push(obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return out, nil
}

func decode(cm *corev1.ConfigMap) (engine.Bundle, error) {
	doc := []byte(cm.Data[bundle.Key])
	if gz := cm.BinaryData[bundle.GzipKey]; gz != nil {
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return engine.Bundle{}, err
		}
		if doc, err = io.ReadAll(zr); err != nil {
			return engine.Bundle{}, err
		}
	}
	return engine.Decode(doc)
}

type waiter struct {
	bundles <-chan observed
	timeout time.Duration
}

// until returns how long after start the first bundle satisfying ok arrived.
func (w *waiter) until(start time.Time, ok func(engine.Bundle) bool) (time.Duration, error) {
	deadline := time.After(w.timeout)
	for {
		select {
		case o := <-w.bundles:
			if ok(o.bundle) {
				return o.at.Sub(start), nil
			}
		case <-deadline:
			return 0, fmt.Errorf("no bundle carrying the change after %s", w.timeout)
		}
	}
}

func carriesMarker(b engine.Bundle, marker string) bool {
	for _, p := range b.Policies {
		if p.ID == "measured" {
			return string(p.Rules[0].Conditions[0].Value) == `"`+marker+`"`
		}
	}
	return false
}

func jsonString(s string) *apiextensionsv1.JSON {
	return &apiextensionsv1.JSON{Raw: []byte(`"` + s + `"`)}
}

// policy has n deny rules; rule 0's tool is marker, when given, so that a
// change is visible in the bundle.
func policy(ns, name string, n int, marker string) *v1alpha1.Policy {
	p := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for i := range n {
		tool := fmt.Sprintf("%s_tool_%d", name, i)
		if i == 0 && marker != "" {
			tool = marker
		}
		p.Spec.Rules = append(p.Spec.Rules, v1alpha1.Rule{ID: fmt.Sprintf("r%d", i), Effect: v1alpha1.RuleDeny,
			Description: "latency run",
			Conditions: []v1alpha1.Condition{
				{Field: "tool_name", Operator: "eq", Value: jsonString(tool)},
				{Field: "input.command", Operator: "contains", Value: jsonString(fmt.Sprintf("danger_%d", i))},
			}})
	}
	return p
}

type stats struct{ p50, p90, p99, max, mean time.Duration }

func summarize(lat []time.Duration) stats {
	s := slices.Clone(lat)
	slices.Sort(s)
	pct := func(p float64) time.Duration { return s[int(math.Ceil(p*float64(len(s))))-1] }
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return stats{p50: pct(0.50), p90: pct(0.90), p99: pct(0.99), max: s[len(s)-1], mean: sum / time.Duration(len(s))}
}

// printReconcileMetrics explains the figures: how often the controller ran
// and how its time splits between publishing and the rest (status writes).
func printReconcileMetrics() error {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return err
	}
	for _, f := range families {
		switch f.GetName() {
		case "controller_runtime_reconcile_time_seconds", "toolgate_bundle_publish_duration_seconds":
			for _, m := range f.GetMetric() {
				h := m.GetHistogram()
				if h.GetSampleCount() == 0 {
					continue
				}
				name := f.GetName()
				for _, l := range m.GetLabel() {
					if l.GetName() == "controller" {
						name += "{" + l.GetValue() + "}"
					}
				}
				fmt.Printf("  %-60s n=%-5d mean=%s\n", name, h.GetSampleCount(),
					time.Duration(h.GetSampleSum()/float64(h.GetSampleCount())*float64(time.Second)).Round(100*time.Microsecond))
			}
		}
	}
	return nil
}
