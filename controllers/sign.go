package controllers

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/bundle"
)

// signed returns p carrying its signature (bundle.SignatureKey in data)
// when the operator signs (Options.Keys). An unchanged bundle keeps the
// signature cm already has, if that one is by the current key, for this
// namespace and revision: Ed25519 is deterministic and the counter is
// reused, so a re-reconcile writes nothing. Otherwise the counter is the
// next above the one cm carries, when a trusted key verifies it, and never
// below the publish time in Unix milliseconds: a new leader continues from
// the ConfigMap, and a deleted or tampered ConfigMap still gets a counter
// above every earlier one (clocks permitting), so sidecars do not refuse
// it as a rollback. cm is nil when there is none.
func (r *bundleReconciler) signed(ns string, cm *corev1.ConfigMap, p payload) payload {
	if r.opts.Keys == nil {
		return p
	}
	key := r.opts.Keys.Current()
	var prev uint64
	if cm != nil {
		if raw, ok := cm.Data[bundle.SignatureKey]; ok {
			s, err := r.opts.Keys.Trusted().VerifyStatement([]byte(raw), ns)
			if err == nil {
				if s.KeyID == key.ID() && s.Revision == p.revision {
					return withSignature(p, []byte(raw))
				}
				prev = s.Counter
			}
		}
	}
	counter := max(prev+1, uint64(time.Now().UnixMilli()))
	return withSignature(p, key.Sign(ns, p.revision, counter))
}

func withSignature(p payload, sig []byte) payload {
	p.data = maps.Clone(p.data)
	if p.data == nil {
		p.data = map[string]string{}
	}
	p.data[bundle.SignatureKey] = string(sig)
	return p
}
