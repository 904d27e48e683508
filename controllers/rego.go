package controllers

import (
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/rego"
)

// regoExport is a namespace's last Rego bundle: exporting is done again only
// when the revision or the signing key changes.
type regoExport struct {
	revision, keyID string
	tar             []byte
	err             error
}

// regoBundle is the bundle as `toolgate export rego --tar` writes it, signed
// for OPA with the current key when the operator signs (unless
// RegoUnsigned); nil without
// PublishRego. An error (a policy the exporter refuses) leaves the Rego
// bundle out: the JSON bundle is published regardless.
func (r *bundleReconciler) regoBundle(ns string, b engine.Bundle, revision string) ([]byte, error) {
	if !r.opts.PublishRego {
		return nil, nil
	}
	var signer rego.Signer
	keyID := ""
	if ring := r.keyring(); ring != nil && !r.opts.RegoUnsigned {
		key := ring.Current()
		signer, keyID = key, key.ID()
	}
	if last, ok := r.regoExports.Load(ns); ok {
		if e := last.(regoExport); e.revision == revision && e.keyID == keyID {
			return e.tar, e.err
		}
	}
	b.Revision = revision
	e := regoExport{revision: revision, keyID: keyID}
	out, err := rego.Export(b)
	if err == nil {
		e.tar, err = out.Tar(signer)
	}
	if err != nil {
		e.tar, e.err = nil, err
	}
	r.regoExports.Store(ns, e)
	return e.tar, e.err
}
