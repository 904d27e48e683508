package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

// tracker watches, as a client of the API would, every bundle ConfigMap
// and every object's status, and records when each arrived.
type tracker struct {
	mu sync.Mutex
	// policies is how many Policies a namespace's complete bundle holds.
	policies int
	// published: namespace -> when its first complete bundle was seen.
	published     map[string]time.Time
	lastPublished time.Time
	// ready: object key -> whether its status is Ready for its generation.
	ready     map[string]bool
	nReady    int
	lastReady time.Time // when nReady last reached expected
	expected  int
	// markers: namespace -> the marker an update waits to see in its bundle.
	markers map[string]chan time.Time
	marker  map[string]string
	// readyWaits: object key -> the generation an update waits to see Ready.
	readyWaits map[string]readyWait
}

type readyWait struct {
	generation int64
	ch         chan time.Time
}

func startTracker(ctx context.Context, cfg *rest.Config, policies, expected int) (*tracker, error) {
	t := &tracker{policies: policies, expected: expected, published: map[string]time.Time{}, ready: map[string]bool{},
		markers: map[string]chan time.Time{}, marker: map[string]string{}, readyWaits: map[string]readyWait{}}
	c, err := cache.New(cfg, cache.Options{Scheme: testenv.Scheme(), ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", bundle.DefaultConfigMapName)},
	}})
	if err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{&v1alpha1.Policy{}, &v1alpha1.FrozenAgent{}, &v1alpha1.Agent{}, &v1alpha1.PolicyException{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { t.status(o) },
			UpdateFunc: func(_, o any) { t.status(o) },
		}); err != nil {
			return nil, err
		}
	}
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.bundle(o) },
		UpdateFunc: func(_, o any) { t.bundle(o) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the tracker's cache did not sync")
	}
	return t, nil
}

// bundle records a bundle ConfigMap's arrival.
func (t *tracker) bundle(o any) {
	at := time.Now()
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return
	}
	b, err := testenv.DecodeBundle(cm)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scale: undecodable bundle in %s: %v\n", cm.Namespace, err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.published[cm.Namespace]; !seen && len(b.Policies) == t.policies && len(b.FrozenAgents) == 1 {
		t.published[cm.Namespace] = at
		t.lastPublished = at
	}
	if ch, ok := t.markers[cm.Namespace]; ok {
		for _, p := range b.Policies {
			if p.ID == "p0" && string(p.Rules[0].Conditions[0].Value) == `"`+t.marker[cm.Namespace]+`"` {
				ch <- at
				delete(t.markers, cm.Namespace)
				break
			}
		}
	}
}

// status records whether an object's status is Ready for its generation.
func (t *tracker) status(o any) {
	at := time.Now()
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	var conds []metav1.Condition
	var observed int64
	switch x := obj.(type) {
	case *v1alpha1.Policy:
		conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
	case *v1alpha1.FrozenAgent:
		conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
	case *v1alpha1.Agent:
		conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
	case *v1alpha1.PolicyException:
		conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
	}
	c := apimeta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	ready := c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == obj.GetGeneration() &&
		observed == obj.GetGeneration()
	key := fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
	t.mu.Lock()
	defer t.mu.Unlock()
	switch was := t.ready[key]; {
	case ready && !was:
		t.nReady++
		if t.nReady == t.expected {
			t.lastReady = at
		}
	case !ready && was:
		t.nReady--
	}
	t.ready[key] = ready
	if w, ok := t.readyWaits[key]; ok && ready && obj.GetGeneration() >= w.generation {
		w.ch <- at
		delete(t.readyWaits, key)
	}
}

// progress is how many namespaces have their bundle and how many objects
// are Ready, with the times the last of each arrived.
func (t *tracker) progress() (published, ready int, lastPublished, lastReady time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.published), t.nReady, t.lastPublished, t.lastReady
}

// expectMarker returns a channel that receives when ns's bundle carries
// marker; expectReady one that receives when the Policy is Ready at
// generation or later. Both are set before the write that causes them.
func (t *tracker) expectMarker(ns, marker string) <-chan time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := make(chan time.Time, 1)
	t.markers[ns], t.marker[ns] = ch, marker
	return ch
}

func (t *tracker) expectReady(p *v1alpha1.Policy, generation int64) <-chan time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := make(chan time.Time, 1)
	t.readyWaits[fmt.Sprintf("%T/%s/%s", p, p.Namespace, p.Name)] = readyWait{generation: generation, ch: ch}
	return ch
}
