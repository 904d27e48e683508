package controllers

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

func TestRequeueAtNextExpiry(t *testing.T) {
	freeze := func(d *time.Duration) v1alpha1.FrozenAgent {
		f := v1alpha1.FrozenAgent{}
		if d != nil {
			mt := metav1.NewTime(t0.Add(*d))
			f.Spec.ExpiresAt = &mt
		}
		return f
	}
	dur := func(d time.Duration) *time.Duration { return &d }
	in := inputs{frozen: []v1alpha1.FrozenAgent{freeze(nil), freeze(dur(-time.Minute)), freeze(dur(90 * time.Second)), freeze(dur(30 * time.Second))}}
	res, err := requeueResult(in, t0, nil)
	if err != nil || res.RequeueAfter != 30*time.Second {
		t.Fatalf("got %+v, %v; want a requeue in 30s", res, err)
	}
	res, err = requeueResult(inputs{frozen: []v1alpha1.FrozenAgent{freeze(nil)}}, t0, nil)
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("no expiry pending: %+v, %v", res, err)
	}
	_, err = requeueResult(inputs{}, t0, errors.New("too large"))
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("too large without a pending expiry: %v, want a terminal error", err)
	}
	res, err = requeueResult(in, t0, errors.New("too large"))
	if err != nil || res.RequeueAfter != 30*time.Second {
		t.Fatalf("too large with a pending expiry: %+v, %v", res, err)
	}
}
