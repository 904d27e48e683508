package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// floorResult is how fast the API server takes the writes a cold start
// needs when nothing but a tight loop sends them: one ConfigMap per
// namespace and one status patch per object, with inFlight requests at a
// time. No manager can publish faster than this on the same machine.
type floorResult struct {
	namespaces, objects int
	inFlight            int
	configMaps          time.Duration // all ConfigMaps created
	statuses            time.Duration // then all statuses patched
}

func (f floorResult) perSecond(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// measureFloor populates a fresh control plane as measure does, then, at
// each concurrency in turn, creates one ConfigMap of a bundle's size in
// every namespace and patches every object's status to Ready, as the
// manager's first publish and status pass do.
func measureFloor(c config, dir string, n int) ([]floorResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cp, err := startControlPlane(dir)
	if err != nil {
		return nil, err
	}
	defer cp.stop()
	ctx := context.Background()
	logf("%d namespaces, floor: creating %d objects", n, n*c.perNamespace)
	objs, err := populate(ctx, cp.admin, n, c.perNamespace, c.workers)
	if err != nil {
		return nil, err
	}
	var out []floorResult
	for _, inFlight := range c.floor {
		r := floorResult{namespaces: n, objects: len(objs), inFlight: inFlight}
		name := fmt.Sprintf("floor-%d", inFlight)
		start := time.Now()
		err := inParallel(ctx, n, inFlight, func(ctx context.Context, i int) error {
			return cp.admin.Create(ctx, floorConfigMap(namespaceName(i), name))
		})
		if err != nil {
			return nil, fmt.Errorf("floor at %d in flight: %w", inFlight, err)
		}
		r.configMaps = time.Since(start)
		start = time.Now()
		err = inParallel(ctx, len(objs), inFlight, func(ctx context.Context, i int) error {
			return patchReady(ctx, cp.admin, objs[i], name)
		})
		if err != nil {
			return nil, fmt.Errorf("floor at %d in flight: %w", inFlight, err)
		}
		r.statuses = time.Since(start)
		logf("%d namespaces, floor at %d in flight: %d ConfigMaps in %s (%.0f/s), %d statuses in %s (%.0f/s)", n, inFlight,
			n, r.configMaps.Round(10*time.Millisecond), r.perSecond(n, r.configMaps),
			len(objs), r.statuses.Round(10*time.Millisecond), r.perSecond(len(objs), r.statuses))
		out = append(out, r)
	}
	return out, nil
}

// inParallel runs do(0..n-1) with at most limit at once.
func inParallel(ctx context.Context, n, limit int, do func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error { return do(ctx, i) })
	}
	return g.Wait()
}

// floorConfigMap is about as large as a bundle ConfigMap of objectsFor's
// objects, signed (4 KiB).
func floorConfigMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string]string{"bundle.json": strings.Repeat("x", 4<<10)}}
}

// patchReady merge-patches obj's status with a Ready condition naming
// marker (each run's patch changes the object, so none is a no-op). obj
// is as the API server last returned it: like the manager, which reads
// from its cache, the loop sends no read.
func patchReady(ctx context.Context, c client.Client, obj client.Object, marker string) error {
	before := obj.DeepCopyObject().(client.Object)
	var conds *[]metav1.Condition
	var observed *int64
	switch x := obj.(type) {
	case *v1alpha1.Policy:
		conds, observed = &x.Status.Conditions, &x.Status.ObservedGeneration
	case *v1alpha1.FrozenAgent:
		conds, observed = &x.Status.Conditions, &x.Status.ObservedGeneration
	case *v1alpha1.Agent:
		conds, observed = &x.Status.Conditions, &x.Status.ObservedGeneration
	case *v1alpha1.PolicyException:
		conds, observed = &x.Status.Conditions, &x.Status.ObservedGeneration
	default:
		return fmt.Errorf("no status to patch on %T", obj)
	}
	*observed = obj.GetGeneration()
	apimeta.SetStatusCondition(conds, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "Published", Message: "floor " + marker, ObservedGeneration: obj.GetGeneration()})
	return c.Status().Patch(ctx, obj, client.MergeFrom(before))
}

// printFloor prints the floor of each size and concurrency.
func printFloor(floors []floorResult) {
	if len(floors) == 0 {
		return
	}
	fmt.Println()
	fmt.Printf("%-8s %-8s %-10s %-22s %-22s %s\n", "ns", "objects", "in flight", "ConfigMaps created", "statuses patched", "cold start floor (both)")
	for _, f := range floors {
		fmt.Printf("%-8d %-8d %-10d %-22s %-22s %s\n", f.namespaces, f.objects, f.inFlight,
			fmt.Sprintf("%s (%.0f/s)", f.configMaps.Round(10*time.Millisecond), f.perSecond(f.namespaces, f.configMaps)),
			fmt.Sprintf("%s (%.0f/s)", f.statuses.Round(10*time.Millisecond), f.perSecond(f.objects, f.statuses)),
			(f.configMaps + f.statuses).Round(10*time.Millisecond))
	}
}

// floorDir is the working directory of a size's floor measurement.
func floorDir(dir string, n int) string { return filepath.Join(dir, fmt.Sprintf("floor-%d", n)) }
