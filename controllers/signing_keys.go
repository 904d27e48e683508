package controllers

import (
	"context"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/toolgate/toolgate/bundle"
)

// SigningKeys holds the keyring bundles are signed with. The manager swaps
// it when its key Secret changes, while reconciles read it; each swap has
// the bundle controller re-sign every namespace's bundle.
type SigningKeys struct {
	ring atomic.Pointer[bundle.Keyring]

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// NewSigningKeys holds r, which must not be nil.
func NewSigningKeys(r *bundle.Keyring) *SigningKeys {
	k := &SigningKeys{subs: map[chan struct{}]struct{}{}}
	k.ring.Store(r)
	return k
}

// Load is the keyring now. Each signing loads it once, so a bundle's
// signature and endorsements come from one keyring even while a swap
// happens; the swap's re-sign follows.
func (k *SigningKeys) Load() *bundle.Keyring { return k.ring.Load() }

// Swap makes r the keyring and tells every running bundle controller.
func (k *SigningKeys) Swap(r *bundle.Keyring) {
	k.ring.Store(r)
	k.mu.Lock()
	defer k.mu.Unlock()
	for c := range k.subs {
		select {
		case c <- struct{}{}:
		default: // a re-sign is already due
		}
	}
}

// swapped signals after each Swap until ctx is done.
func (k *SigningKeys) swapped(ctx context.Context) <-chan struct{} {
	c := make(chan struct{}, 1)
	k.mu.Lock()
	k.subs[c] = struct{}{}
	k.mu.Unlock()
	go func() {
		<-ctx.Done()
		k.mu.Lock()
		delete(k.subs, c)
		k.mu.Unlock()
	}()
	return c
}

// reSignOnSwap enqueues every namespace that has a bundle ConfigMap after
// each keyring swap: re-signed, the bundles carry the new key (and its
// endorsements) without waiting for a change in each namespace.
func reSignOnSwap(keys *SigningKeys, c client.Reader, configMapName string) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		due := keys.swapped(ctx)
		log := ctrl.Log.WithName("signing")
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-due:
				}
				var cms corev1.ConfigMapList
				if err := c.List(ctx, &cms); err != nil {
					log.Error(err, "listing the bundle ConfigMaps to re-sign them; they are re-signed at their next change")
					continue
				}
				n := 0
				for _, cm := range cms.Items {
					if cm.Name == configMapName {
						q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}})
						n++
					}
				}
				log.Info("signing keys changed: re-signing every bundle", "key", keys.Load().Current().ID(), "namespaces", n)
			}
		}()
		return nil
	})
}
