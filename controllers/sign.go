package controllers

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/bundle"
)

// signed returns p carrying its signature (bundle.SignatureKey in data),
// and the signing key's endorsements while the keyring has other keys
// (bundle.EndorsementsKey), when the operator signs (Options.Keys). The
// signature is sealed from the one cm carries (bundle.Keyring.Seal): kept
// for an unchanged bundle, so a re-reconcile writes nothing; otherwise its
// counter continues from cm's, so a new leader continues from the
// ConfigMap, and a deleted or tampered one still gets a counter above every
// earlier one. cm is nil when there is none.
func (r *bundleReconciler) signed(ns string, cm *corev1.ConfigMap, p payload) payload {
	ring := r.keyring()
	if ring == nil {
		return p
	}
	var prev []byte
	if cm != nil {
		if raw, ok := cm.Data[bundle.SignatureKey]; ok {
			prev = []byte(raw)
		}
	}
	sig := ring.Seal(ns, p.revision, prev, time.Now())
	return withIndexSignature(withSignature(p, sig, ring.Endorsements()), ring, ns, sig)
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
