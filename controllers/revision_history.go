package controllers

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// revisionHistoryDepth is how many published revisions of a namespace are
// remembered. A sidecar more than this many publishes behind is stale
// whatever it serves, which is what a sidecar that far behind is.
const revisionHistoryDepth = 8

// publishedRevision is one revision the operator published in a namespace
// and the generations of the objects it was built from (outcome.generations,
// shared with the outcome, not copied: 10,000 namespaces keep only
// references).
type publishedRevision struct {
	revision    string
	generations map[types.UID]int64
}

// namespaceHistory is one namespace's recent revisions, newest last, and
// the digest of the freezes its sidecars should apply (FreezeDigest of
// expectedFreezes), as its last status pass computed it.
type namespaceHistory struct {
	revisions    []publishedRevision
	freezeDigest string
}

// revisionHistory remembers, per namespace, which object generations each
// recent revision carries, so a sidecar's Lease naming a revision says
// which objects it enforces. A revision it does not know (published before
// a restart, or too long ago) contains nothing: its sidecar is stale.
type revisionHistory struct {
	mu sync.Mutex
	m  map[string]*namespaceHistory
}

func newRevisionHistory() *revisionHistory {
	return &revisionHistory{m: map[string]*namespaceHistory{}}
}

// record notes that revision, built from generations, is live in ns. A
// revision published again (same content) moves to the newest place with
// the newer generations: a sidecar serving it serves those too.
func (h *revisionHistory) record(ns, revision string, generations map[types.UID]int64) {
	if revision == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	nh := h.m[ns]
	if nh == nil {
		nh = &namespaceHistory{}
		h.m[ns] = nh
	}
	nh.revisions = slices.DeleteFunc(nh.revisions, func(p publishedRevision) bool { return p.revision == revision })
	if len(nh.revisions) >= revisionHistoryDepth {
		nh.revisions = slices.Delete(nh.revisions, 0, len(nh.revisions)-revisionHistoryDepth+1)
	}
	nh.revisions = append(nh.revisions, publishedRevision{revision: revision, generations: generations})
}

// forget drops ns: its bundle is gone.
func (h *revisionHistory) forget(ns string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, ns)
}

// setFreezeDigest remembers the digest of the freezes ns's sidecars should
// apply, for the cluster-scoped status passes that do not gather ns.
func (h *revisionHistory) setFreezeDigest(ns, digest string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if nh := h.m[ns]; nh != nil {
		nh.freezeDigest = digest
	}
}

// revisions is what a status pass reads of ns: a snapshot of the revisions
// (the maps are never written after record) and the freeze digest.
func (h *revisionHistory) revisions(ns string) revisionsOf {
	h.mu.Lock()
	defer h.mu.Unlock()
	nh := h.m[ns]
	if nh == nil {
		return revisionsOf{}
	}
	return revisionsOf{published: slices.Clone(nh.revisions), freezeDigest: nh.freezeDigest}
}

// revisionsOf is a namespace's history as one status pass sees it.
type revisionsOf struct {
	published    []publishedRevision
	freezeDigest string
}

// contains tells whether revision carries the object uid at generation.
func (r revisionsOf) contains(revision string, uid types.UID, generation int64) bool {
	for _, p := range r.published {
		if p.revision == revision {
			gen, ok := p.generations[uid]
			return ok && gen == generation
		}
	}
	return false
}
