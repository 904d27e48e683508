package sidecar

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// errRollback refuses a validly signed bundle older than the one served.
var errRollback = errors.New("bundle refused: rollback")

// Reasons a bundle is refused, in toolgate_sidecar_bundle_rejected_total
// and /readyz.
const (
	reasonUnsigned       = "unsigned"
	reasonUnknownKey     = "unknown_key"
	reasonBadSignature   = "bad_signature"
	reasonWrongNamespace = "wrong_namespace"
	reasonBadEndorsement = "bad_endorsement"
	reasonRollback       = "rollback"
	reasonCorrupt        = "corrupt"
	reasonUnreadable     = "unreadable"
)

func rejectReason(err error) string {
	switch {
	case errors.Is(err, bundle.ErrUnsigned):
		return reasonUnsigned
	case errors.Is(err, bundle.ErrUnknownKey):
		return reasonUnknownKey
	case errors.Is(err, bundle.ErrBadEndorsement):
		return reasonBadEndorsement
	case errors.Is(err, bundle.ErrWrongNamespace):
		return reasonWrongNamespace
	case errors.Is(err, bundle.ErrBadSignature):
		return reasonBadSignature
	case errors.Is(err, errRollback):
		return reasonRollback
	case errors.Is(err, engine.ErrCorruptBundle):
		return reasonCorrupt
	}
	return reasonUnreadable
}

// rejection is the last bundle refused, as /readyz shows it until a bundle
// loads again.
type rejection struct {
	Reason string    `json:"reason"`
	Source string    `json:"source"`
	Error  string    `json:"error"`
	At     time.Time `json:"at"`
}

// seal is what vouches for a bundle: its bundle.sig and, during a key
// rotation, its bundle.endorsements (nil when there is none).
type seal struct {
	sig, endorsements []byte
}

func (a seal) equal(b seal) bool {
	return bytes.Equal(a.sig, b.sig) && bytes.Equal(a.endorsements, b.endorsements)
}

// verified is what a checked signature vouches for; the zero value when
// the sidecar has no trusted keys.
type verified struct {
	counter uint64
	seal    seal
}

// loadTrustedKeys reads --trusted-keys and --trusted-keys-pem; nil, nil
// when neither is given.
func (o *Options) loadTrustedKeys() (*bundle.TrustedKeys, error) {
	if o.TrustedKeys == "" && o.TrustedKeysPEM == "" {
		return nil, nil
	}
	var pemData []byte
	if o.TrustedKeys != "" {
		data, err := os.ReadFile(o.TrustedKeys)
		if err != nil {
			return nil, fmt.Errorf("--trusted-keys: %w", err)
		}
		if _, err := bundle.ParseTrustedKeys(data); err != nil {
			return nil, fmt.Errorf("--trusted-keys %s: %w", o.TrustedKeys, err)
		}
		pemData = append(pemData, data...)
		pemData = append(pemData, '\n')
	}
	if o.TrustedKeysPEM != "" {
		if _, err := bundle.ParseTrustedKeys([]byte(o.TrustedKeysPEM)); err != nil {
			return nil, fmt.Errorf("--trusted-keys-pem: %w", err)
		}
		pemData = append(pemData, o.TrustedKeysPEM...)
	}
	return bundle.ParseTrustedKeys(pemData)
}

// bundleNamespace is the namespace signatures must name: the bundle
// ConfigMap's, or --bundle-namespace for the file sources.
func (o *Options) bundleNamespace() string {
	if ns, _, err := ParseConfigMapRef(o.ConfigMap); err == nil {
		return ns
	}
	return o.BundleNamespace
}

// verify checks the seal against the trusted keys, once per load: a
// bundle signed by a key the sidecar does not trust is accepted only when
// its endorsement by a trusted key holds (bundle.VerifyEndorsed). Without
// trusted keys every bundle is accepted unsigned, as New announced.
func (s *Server) verify(revision string, sl seal) (verified, error) {
	if s.trust == nil {
		return verified{}, nil
	}
	s.verifications.Add(1)
	v, err := s.trust.VerifyEndorsed(sl.sig, sl.endorsements, s.namespace, revision)
	if err != nil {
		return verified{}, err
	}
	return verified{counter: v.Counter, seal: sl}, nil
}

// checkCounter refuses a signed bundle whose publish counter is lower than
// the highest one loaded, or equal to it with other content. The highest
// counter survives an unload (a deleted ConfigMap), so deleting the bundle
// and putting back an older signed one does not roll back either. Called
// with loadMu held.
func (s *Server) checkCounter(revision string, v verified) error {
	if s.trust == nil {
		return nil
	}
	if s.counter > 0 && (v.counter < s.counter || v.counter == s.counter && revision != s.counterRevision) {
		return fmt.Errorf("%w: publish counter %d (revision %s) is older than %d (revision %s), already served",
			errRollback, v.counter, revision, s.counter, s.counterRevision)
	}
	if s.cache != nil && (v.counter != s.counter || revision != s.counterRevision) {
		if err := s.cache.saveCounter(v.counter, revision); err != nil {
			s.log.Warn("saving the publish counter failed; a restart would forget it", "dir", s.cache.dir, "err", err)
		}
	}
	s.counter, s.counterRevision = v.counter, revision
	return nil
}

// loadCounter restores the highest publish counter from the cache
// directory, before anything is loaded. An unreadable one is refused like
// a tampered cache: the sidecar then starts from the ConfigMap.
func (s *Server) loadCounter() {
	if s.trust == nil || s.cache == nil {
		return
	}
	n, rev, err := s.cache.readCounter()
	if err != nil {
		s.log.Warn("the saved publish counter is unreadable; rollback protection starts from the next bundle", "err", err)
		return
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.counter, s.counterRevision = n, rev
}
