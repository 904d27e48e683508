package bundlesource

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// ErrRollback refuses a validly signed bundle older than the one served.
var ErrRollback = errors.New("bundle refused: rollback")

// Reasons a bundle is refused, in toolgate_sidecar_bundle_rejected_total
// and /readyz.
const (
	ReasonUnsigned       = "unsigned"
	ReasonUnknownKey     = "unknown_key"
	ReasonBadSignature   = "bad_signature"
	ReasonWrongNamespace = "wrong_namespace"
	ReasonBadEndorsement = "bad_endorsement"
	ReasonRollback       = "rollback"
	ReasonCorrupt        = "corrupt"
	ReasonUnreadable     = "unreadable"
	// A chunked bundle (bundle/chunks.go) whose index does not parse, one
	// of whose parts cannot be read, or whose parts do not match the index.
	ReasonBadIndex     = "bad_index"
	ReasonMissingPart  = "missing_part"
	ReasonPartMismatch = "part_mismatch"
)

// RejectReason is why err refused a bundle, one of the Reason constants.
func RejectReason(err error) string {
	switch {
	case errors.Is(err, bundle.ErrUnsigned):
		return ReasonUnsigned
	case errors.Is(err, bundle.ErrUnknownKey):
		return ReasonUnknownKey
	case errors.Is(err, bundle.ErrBadEndorsement):
		return ReasonBadEndorsement
	case errors.Is(err, bundle.ErrWrongNamespace):
		return ReasonWrongNamespace
	case errors.Is(err, bundle.ErrBadSignature):
		return ReasonBadSignature
	case errors.Is(err, ErrRollback):
		return ReasonRollback
	case errors.Is(err, bundle.ErrBadIndex):
		return ReasonBadIndex
	case errors.Is(err, bundle.ErrMissingPart):
		return ReasonMissingPart
	case errors.Is(err, bundle.ErrPartMismatch):
		return ReasonPartMismatch
	case errors.Is(err, engine.ErrCorruptBundle):
		return ReasonCorrupt
	}
	return ReasonUnreadable
}

// Rejection is the last bundle refused, as /readyz shows it until a bundle
// loads again.
type Rejection struct {
	Reason string `json:"reason"`
	Source string `json:"source"`
	// Revision is the refused bundle's, when it decoded far enough to
	// name one.
	Revision string    `json:"revision,omitempty"`
	Error    string    `json:"error"`
	At       time.Time `json:"at"`
}

// Seal is what vouches for a bundle: its bundle.sig and, during a key
// rotation, its bundle.endorsements (nil when there is none).
type Seal struct {
	Sig, Endorsements []byte
}

func (a Seal) equal(b Seal) bool {
	return bytes.Equal(a.Sig, b.Sig) && bytes.Equal(a.Endorsements, b.Endorsements)
}

// verified is what a checked signature vouches for; the zero value when
// the sidecar has no trusted keys.
type verified struct {
	counter uint64
	seal    Seal
}

// verify checks the seal against the trusted keys, once per load: a
// bundle signed by a key the sidecar does not trust is accepted only when
// its endorsement by a trusted key holds (bundle.VerifyEndorsed). Without
// trusted keys every bundle is accepted unsigned, as the sidecar announced
// at start.
func (l *Loader) verify(revision string, sl Seal) (verified, error) {
	if l.cfg.Trust == nil {
		return verified{}, nil
	}
	l.verifications.Add(1)
	v, err := l.cfg.Trust.VerifyEndorsed(sl.Sig, sl.Endorsements, l.cfg.Namespace, revision)
	if err != nil {
		return verified{}, err
	}
	return verified{counter: v.Counter, seal: sl}, nil
}

// checkCounter refuses a signed bundle whose publish counter is lower than
// the highest one loaded, or equal to it with other content. The highest
// counter survives an unload (a deleted ConfigMap), so deleting the bundle
// and putting back an older signed one does not roll back either. Called
// with mu held.
func (l *Loader) checkCounter(revision string, v verified) error {
	if l.cfg.Trust == nil {
		return nil
	}
	if l.counter > 0 && (v.counter < l.counter || v.counter == l.counter && revision != l.counterRevision) {
		return fmt.Errorf("%w: publish counter %d (revision %s) is older than %d (revision %s), already served",
			ErrRollback, v.counter, revision, l.counter, l.counterRevision)
	}
	if l.cache != nil && (v.counter != l.counter || revision != l.counterRevision) {
		if err := l.cache.saveCounter(v.counter, revision); err != nil {
			l.log.Warn("saving the publish counter failed; a restart would forget it", "dir", l.cache.dir, "err", err)
		}
	}
	l.counter, l.counterRevision = v.counter, revision
	return nil
}

// loadCounter restores the highest publish counter from the cache
// directory, before anything is loaded. An unreadable one is refused like
// a tampered cache: the sidecar then starts from the ConfigMap.
func (l *Loader) loadCounter() {
	if l.cfg.Trust == nil || l.cache == nil {
		return
	}
	n, rev, err := l.cache.readCounter()
	if err != nil {
		l.log.Warn("the saved publish counter is unreadable; rollback protection starts from the next bundle", "err", err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counter, l.counterRevision = n, rev
}
