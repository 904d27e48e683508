package sidecar

import (
	"errors"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// Origins name where a bundle came from, in logs, /readyz and metrics.
const (
	originConfigMap  = "configmap"
	originBundleDir  = "bundle-dir"
	originBundleFile = "bundle-file"
	originCache      = "cache"
	originAPI        = "api" // LoadDocument called directly
)

// LoadDocument decodes a bundle document (gzip-compressed when gzipped),
// compiles it and swaps it in. A document that does not decode is rejected
// and counted, and the bundle being served stays. With trusted keys, an
// unsigned document is refused: use LoadSignedDocument.
func (s *Server) LoadDocument(raw []byte, gzipped bool) error {
	return s.load(raw, gzipped, originAPI)
}

// LoadSignedDocument is LoadDocument with the bundle's signature document
// (bundle.sig), checked against the trusted keys when there are any.
func (s *Server) LoadSignedDocument(raw []byte, gzipped bool, sig []byte) error {
	return s.loadSigned(raw, gzipped, sig, originAPI)
}

func (s *Server) load(raw []byte, gzipped bool, origin string) error {
	return s.loadSigned(raw, gzipped, nil, origin)
}

// loadSigned verifies the signature once, here, for the whole bundle: the
// decision path never sees it.
func (s *Server) loadSigned(raw []byte, gzipped bool, sig []byte, origin string) error {
	return s.loadSealed(raw, gzipped, seal{sig: sig}, origin)
}

// loadSealed is loadSigned with the whole seal: the signature and the
// signing key's endorsements, as the sources read them.
func (s *Server) loadSealed(raw []byte, gzipped bool, sl seal, origin string) error {
	doc, err := bundle.ReadDocument(raw, gzipped)
	if err == nil {
		var b engine.Bundle
		if b, err = engine.Decode(doc); err == nil {
			var v verified
			if v, err = s.verify(b.Revision, sl); err == nil {
				if err = s.swap(b, doc, v, origin); err == nil {
					return nil
				}
			}
		}
	}
	s.reject(origin, err)
	return err
}

func (s *Server) swap(b engine.Bundle, doc []byte, v verified, origin string) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if err := s.checkCounter(b.Revision, v); err != nil {
		return err
	}
	s.rejected.Store(nil)
	cur := s.d.State()
	if cur.Compiled != nil && cur.Revision == b.Revision {
		// A resync or a re-read of the same content (or the same content
		// re-signed); only note that the source now vouches for what the
		// cache served.
		if cur.Origin != origin {
			s.d.Serve(cur.Compiled, cur.Revision, origin, cur.LoadedAt)
		}
		s.saveCache(doc, v.seal, origin)
		return nil
	}
	started := time.Now()
	compiled, diags := engine.Compile(b)
	now := time.Now()
	s.d.Serve(compiled.WithFrozen(s.apiFrozen), b.Revision, origin, now)
	if s.mcp != nil {
		s.mcp.BundleLoaded(b)
	}
	s.metrics.setBundle(b.Revision, now)
	s.log.Info("bundle loaded", "source", origin, "revision", b.Revision, "policies", len(b.Policies),
		"frozenAgents", len(b.FrozenAgents), "compile", now.Sub(started))
	for _, d := range diags {
		// Compile keeps such a policy and denies POLICY_COMPILE_ERROR when
		// evaluation reaches it; the webhook should have stopped it earlier.
		s.log.Warn("policy does not compile; decisions reaching it deny", "source", origin, "diagnostic", d.String())
	}
	s.saveCache(doc, v.seal, origin)
	return nil
}

func (s *Server) saveCache(doc []byte, sl seal, origin string) {
	if origin != originCache && s.cache != nil {
		if err := s.cache.save(doc, sl); err != nil {
			s.log.Warn("caching the bundle failed", "dir", s.cache.dir, "err", err)
		}
	}
}

// unload drops the bundle because its source says there is none (the
// bundle ConfigMap was deleted): from now on every decision is deny
// NO_POLICIES, and the cache is cleared so a restart does not resurrect it.
func (s *Server) unload(origin, why string) {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.cache != nil {
		if err := s.cache.remove(); err != nil {
			s.log.Warn("removing the cached bundle failed", "dir", s.cache.dir, "err", err)
		}
	}
	if !s.d.Ready() {
		return
	}
	s.d.Serve(nil, "", origin, time.Now())
	s.metrics.setBundle("", time.Time{})
	s.log.Warn("bundle unloaded; every decision is deny "+string(engine.CodeNoPolicies), "source", origin, "why", why)
}

func (s *Server) reject(origin string, err error) {
	reason := rejectReason(err)
	s.metrics.reloadFailures.WithLabelValues(origin).Inc()
	s.metrics.rejected.WithLabelValues(reason).Inc()
	s.rejected.Store(&rejection{Reason: reason, Source: origin, Error: err.Error(), At: time.Now().UTC()})
	s.log.Error("bundle rejected; the last good bundle keeps serving", "source", origin,
		"serving", s.Revision(), "reason", reason, "err", err, "corrupt", errors.Is(err, engine.ErrCorruptBundle))
}

// loadCache serves the cached bundle, if any, until the source answers.
func (s *Server) loadCache() {
	if s.cache == nil {
		return
	}
	s.loadCounter()
	doc, sl, err := s.cache.read()
	switch {
	case err != nil:
		s.reject(originCache, err)
	case doc != nil:
		_ = s.loadSealed(doc, false, sl, originCache)
	}
}
