package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A sidecar reports what it serves in a coordination.k8s.io/v1 Lease named
// after its Pod, in its Pod's namespace, labelled LabelSidecar and owned by
// the Pod (so it goes with it). The sidecar writes it and the operator reads
// it into the Enforced condition; both use these definitions.
const (
	// LabelSidecar marks a sidecar's Lease (value "true"). The sidecar
	// Lease admission policy refuses a write of a Lease carrying it by
	// anyone but the sidecar of the Pod the Lease is named after.
	LabelSidecar = "toolgate.dev/sidecar"

	// AnnotationLeaseRevision is the revision of the bundle the sidecar
	// serves ("" before its first bundle).
	AnnotationLeaseRevision = "toolgate.dev/bundle-revision"
	// AnnotationLeaseFreezeDigest is FreezeDigest of every freeze the
	// sidecar applies, including those AnnotationLeaseFrozen leaves out.
	AnnotationLeaseFreezeDigest = "toolgate.dev/freeze-digest"
	// AnnotationLeaseFrozen lists the freezes the sidecar applies
	// (FreezeName), comma separated, sorted, at most MaxLeaseFrozenNames.
	AnnotationLeaseFrozen = "toolgate.dev/frozen"
	// AnnotationLeaseFrozenTruncated is "true" when AnnotationLeaseFrozen
	// leaves names out: only the digest then covers them all.
	AnnotationLeaseFrozenTruncated = "toolgate.dev/frozen-truncated"
	// AnnotationLeaseRefusedRevision and AnnotationLeaseRefusedReason are
	// the last bundle the sidecar refused and why (capped at
	// MaxLeaseReasonBytes), while it serves an older one; absent otherwise.
	AnnotationLeaseRefusedRevision = "toolgate.dev/refused-revision"
	AnnotationLeaseRefusedReason   = "toolgate.dev/refused-reason"
	// AnnotationLeaseVersion is the sidecar's toolgate version.
	AnnotationLeaseVersion = "toolgate.dev/version"

	// SidecarLeaseRenewSeconds is how often a sidecar renews its Lease
	// (and it writes at once when what it serves changes).
	SidecarLeaseRenewSeconds = 10
	// SidecarLeaseDurationSeconds is the Lease's spec.leaseDurationSeconds:
	// a Lease not renewed for this long is unreporting.
	SidecarLeaseDurationSeconds = 30
	// MaxLeaseFrozenNames caps AnnotationLeaseFrozen.
	MaxLeaseFrozenNames = 64
	// MaxLeaseReasonBytes caps AnnotationLeaseRefusedReason.
	MaxLeaseReasonBytes = 1024
)

// FreezeName is how a sidecar's Lease names a freeze it applies: the kind
// and the object's name ("FrozenAgent/stop-billing",
// "ClusterFrozenAgent/incident-42").
func FreezeName(kind, name string) string { return kind + "/" + name }

// FreezeDigest is the digest of a set of FreezeNames, whatever their order:
// the first 16 bytes of SHA-256 over the sorted names, newline separated,
// in hex. The empty set has a digest too.
func FreezeDigest(names []string) string {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
	return hex.EncodeToString(sum[:16])
}

// SidecarReport is what a sidecar's Lease annotations say.
type SidecarReport struct {
	Revision        string
	FreezeDigest    string
	Frozen          []string // sorted; at most MaxLeaseFrozenNames
	FrozenTruncated bool
	RefusedRevision string
	RefusedReason   string
	Version         string
}

// NewSidecarReport is the report of a sidecar serving revision and
// applying the freezes named (FreezeName), with the names capped and the
// digest over all of them.
func NewSidecarReport(revision string, frozen []string, version string) SidecarReport {
	names := slices.Clone(frozen)
	slices.Sort(names)
	names = slices.Compact(names)
	r := SidecarReport{Revision: revision, FreezeDigest: FreezeDigest(names), Version: version}
	if len(names) > MaxLeaseFrozenNames {
		names, r.FrozenTruncated = names[:MaxLeaseFrozenNames], true
	}
	r.Frozen = names
	return r
}

// Refused records that the sidecar refused revision (may be "" when the
// bundle was too corrupt to name one) for reason.
func (r *SidecarReport) Refused(revision, reason string) {
	if len(reason) > MaxLeaseReasonBytes {
		reason = strings.ToValidUTF8(reason[:MaxLeaseReasonBytes-3], "") + "..."
	}
	r.RefusedRevision, r.RefusedReason = revision, reason
	if reason == "" {
		r.RefusedReason = "refused"
	}
}

// Annotations writes the report as a Lease's annotations (every key, so
// an update replaces what an older report said).
func (r SidecarReport) Annotations() map[string]string {
	a := map[string]string{
		AnnotationLeaseRevision:     r.Revision,
		AnnotationLeaseFreezeDigest: r.FreezeDigest,
		AnnotationLeaseFrozen:       strings.Join(r.Frozen, ","),
		AnnotationLeaseVersion:      r.Version,
	}
	if r.FrozenTruncated {
		a[AnnotationLeaseFrozenTruncated] = "true"
	}
	if r.RefusedReason != "" {
		a[AnnotationLeaseRefusedRevision] = r.RefusedRevision
		a[AnnotationLeaseRefusedReason] = r.RefusedReason
	}
	return a
}

// ParseSidecarReport reads a Lease's annotations. A Lease without the
// revision or digest annotation was not written by a sidecar: an error.
func ParseSidecarReport(a map[string]string) (SidecarReport, error) {
	rev, okRev := a[AnnotationLeaseRevision]
	digest, okDigest := a[AnnotationLeaseFreezeDigest]
	if !okRev || !okDigest {
		return SidecarReport{}, fmt.Errorf("not a sidecar report: annotations %s and %s are required", AnnotationLeaseRevision, AnnotationLeaseFreezeDigest)
	}
	r := SidecarReport{Revision: rev, FreezeDigest: digest, Version: a[AnnotationLeaseVersion],
		RefusedRevision: a[AnnotationLeaseRefusedRevision], RefusedReason: a[AnnotationLeaseRefusedReason]}
	if f := a[AnnotationLeaseFrozen]; f != "" {
		r.Frozen = strings.Split(f, ",")
		if len(r.Frozen) > MaxLeaseFrozenNames {
			return SidecarReport{}, fmt.Errorf("%s lists %d freezes, more than %d", AnnotationLeaseFrozen, len(r.Frozen), MaxLeaseFrozenNames)
		}
	}
	switch t := a[AnnotationLeaseFrozenTruncated]; t {
	case "", "false":
	case "true":
		r.FrozenTruncated = true
	default:
		return SidecarReport{}, fmt.Errorf("%s is %q, not true or false", AnnotationLeaseFrozenTruncated, t)
	}
	return r, nil
}

// Applies tells whether the report shows the freeze named (FreezeName)
// applied: listed, or, when the list is truncated, covered by a digest
// equal to want (the digest of every freeze the sidecar should apply).
func (r SidecarReport) Applies(name, want string) bool {
	if _, found := slices.BinarySearch(r.Frozen, name); found {
		return true
	}
	return r.FrozenTruncated && want != "" && r.FreezeDigest == want
}

// LeaseLive tells whether a Lease renewed at renew with the given duration
// still speaks for its sidecar at now.
func LeaseLive(renew time.Time, durationSeconds int32, now time.Time) bool {
	if renew.IsZero() {
		return false
	}
	if durationSeconds <= 0 {
		durationSeconds = SidecarLeaseDurationSeconds
	}
	return now.Before(renew.Add(time.Duration(durationSeconds) * time.Second))
}
