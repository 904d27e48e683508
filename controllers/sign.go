package controllers

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/bundle"
)

// signed returns p carrying its signature (bundle.SignatureKey in data),
// and the signing key's endorsements while the keyring has other keys
// (bundle.EndorsementsKey), when the operator signs (Options.Keys). An unchanged bundle keeps the
// signature cm already has, if that one is by the current key, for this
// namespace and revision: Ed25519 is deterministic and the counter is
// reused, so a re-reconcile writes nothing. Otherwise the counter is the
// next above the one cm carries, when a trusted key verifies it, and never
// below the publish time in Unix milliseconds: a new leader continues from
// the ConfigMap, and a deleted or tampered ConfigMap still gets a counter
// above every earlier one (clocks permitting), so sidecars do not refuse
// it as a rollback. cm is nil when there is none.
func (r *bundleReconciler) signed(ns string, cm *corev1.ConfigMap, p payload) payload {
	ring := r.keyring()
	if ring == nil {
		return p
	}
	key := ring.Current()
	var prev uint64
	if cm != nil {
		if raw, ok := cm.Data[bundle.SignatureKey]; ok {
			s, err := ring.Trusted().VerifyStatement([]byte(raw), ns)
			if err == nil {
				if s.KeyID == key.ID() && s.Revision == p.revision {
					return withSignature(p, []byte(raw), ring.Endorsements())
				}
				prev = s.Counter
			}
		}
	}
	counter := max(prev+1, uint64(time.Now().UnixMilli()))
	return withSignature(p, key.Sign(ns, p.revision, counter), ring.Endorsements())
}

// keyring is the keyring to sign with now; nil when the operator does not
// sign.
func (r *bundleReconciler) keyring() *bundle.Keyring {
	if r.opts.Keys == nil {
		return nil
	}
	return r.opts.Keys.Load()
}

// withSignature adds the signature and, when there are any, the
// endorsements of the key that made it (none: the key is the only one).
func withSignature(p payload, sig, endorsements []byte) payload {
	p.data = maps.Clone(p.data)
	if p.data == nil {
		p.data = map[string]string{}
	}
	p.data[bundle.SignatureKey] = string(sig)
	if endorsements != nil {
		p.data[bundle.EndorsementsKey] = string(endorsements)
	}
	return p
}
