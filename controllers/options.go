package controllers

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/toolgate/toolgate/bundle"
)

// Size limits. A ConfigMap holds at most 1 MiB of data; the headroom leaves
// room for metadata so the write is not rejected by the API server or etcd.
const (
	DefaultCompressAbove  = 900 << 10
	DefaultMaxStoredBytes = 1<<20 - 48<<10
)

// DefaultMaxConcurrentReconciles is how many namespaces the bundle
// controller publishes at once by default. A publish waits on its API
// write, not on the manager's CPU, so a cold start publishes as fast as the
// API server takes ConfigMaps only with several in flight
// (docs/performance.md#scale).
const DefaultMaxConcurrentReconciles = 16

// Options configure the bundle controller. The zero value is usable.
type Options struct {
	// ConfigMapName is the bundle ConfigMap's name in every namespace.
	ConfigMapName string
	// Namespaces are the namespaces the manager watches (its cache holds
	// only their objects); empty: all. ClusterPolicies and
	// ClusterFrozenAgents are published into these only.
	Namespaces []string
	// Now is the clock used for freeze expiry; time.Now when nil.
	Now func() time.Time
	// CompressAbove is the document size past which it is stored gzipped.
	CompressAbove int
	// MaxStoredBytes is the largest payload written; past it the previous
	// bundle stays and the namespace's objects report BundleTooLarge.
	MaxStoredBytes int
	// MaxParts is the most ConfigMaps of MaxStoredBytes a gzipped bundle
	// is split across (chunks.go); 0 is bundle.MaxParts, the most the
	// sidecar's Role names. 1 publishes nothing past one ConfigMap.
	MaxParts int
	// MaxConcurrentReconciles bounds how many namespaces publish at once
	// (and ApprovalRequests reconcile); status passes run at most
	// min(this, 4) at once.
	MaxConcurrentReconciles int
	// SkipNameValidation lets one process run several managers (tests).
	SkipNameValidation bool
	// Keys, when set, sign every bundle published (bundle.SignatureKey);
	// the first key signs, all verify the counter of the bundle replaced,
	// and the others endorse the first (bundle.EndorsementsKey). Swapping
	// its keyring re-signs every bundle.
	Keys *SigningKeys
	// PublishRego adds the namespace's bundle as an OPA bundle (rego.Export,
	// `toolgate export rego --tar`) under bundle.RegoTarKey, signed for OPA
	// with Keys' current key when Keys is set. Its bytes count against
	// MaxStoredBytes.
	PublishRego bool
	// RegoUnsigned publishes the Rego bundle without its OPA signature even
	// when Keys is set: OPA's configuration file cannot name an EdDSA key,
	// so an OPA that loads the bundle through it (a file:// resource, a
	// bundle service) refuses a signed one. The bundle ConfigMap's write
	// protection then guards it alone.
	RegoUnsigned bool
	// Approvals configure the ApprovalRequest controller: notices and
	// clean-up.
	Approvals ApprovalOptions
}

func (o Options) withDefaults() Options {
	if o.ConfigMapName == "" {
		o.ConfigMapName = bundle.DefaultConfigMapName
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CompressAbove == 0 {
		o.CompressAbove = DefaultCompressAbove
	}
	if o.MaxStoredBytes == 0 {
		o.MaxStoredBytes = DefaultMaxStoredBytes
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	o.Approvals = o.Approvals.withDefaults()
	return o
}

// watches tells whether the operator publishes into namespace ns.
func (o Options) watches(ns string) bool {
	return len(o.Namespaces) == 0 || slices.Contains(o.Namespaces, ns)
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	o = o.withDefaults()
	if errs := validation.IsDNS1123Subdomain(o.ConfigMapName); len(errs) > 0 {
		return fmt.Errorf("bundle ConfigMap name %q is invalid: %s", o.ConfigMapName, errs[0])
	}
	if o.MaxParts < 0 || o.MaxParts > bundle.MaxParts {
		return fmt.Errorf("a bundle is split across 1 to %d ConfigMaps, not %d", bundle.MaxParts, o.MaxParts)
	}
	if o.CompressAbove < 0 || o.MaxStoredBytes < 0 || o.MaxConcurrentReconciles < 0 {
		return fmt.Errorf("size limits and concurrency must not be negative")
	}
	if err := o.Approvals.Validate(); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	return nil
}
