package bundlesource

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
)

// Origins name where a bundle came from, in logs, /readyz and metrics.
const (
	OriginConfigMap  = "configmap"
	OriginBundleDir  = "bundle-dir"
	OriginBundleFile = "bundle-file"
	OriginCache      = "cache"
	OriginAPI        = "api" // the sidecar's LoadDocument called directly
)

// Config is what the bundle sources and the Loader take of the sidecar's
// options, and the sidecar's callbacks.
type Config struct {
	// Exactly one source (NewSource): the ConfigMap NAMESPACE/NAME watched
	// through the API (with Kubeconfig), a mounted ConfigMap volume, or a
	// bundle document on disk; the last two are re-read every PollInterval.
	ConfigMap    string
	BundleDir    string
	BundleFile   string
	Kubeconfig   string
	PollInterval time.Duration
	// CacheDir, when set, keeps the last good bundle on disk, served at
	// start (LoadCache) until the source answers.
	CacheDir string

	// Trust, when set, are the keys a bundle must be signed with, for
	// Namespace; nil accepts unsigned bundles.
	Trust     *bundle.TrustedKeys
	Namespace string

	// OnBundle is told each new bundle swapped in; OnFreezesChanged each
	// time the FrozenAgents watched through the API were applied to the
	// bundle served. Both are called with the loader's lock held, after the
	// swap; nil tells no one.
	OnBundle         func(engine.Bundle)
	OnFreezesChanged func()
	// OnReportChanged is told each time what Report says may have changed:
	// a bundle swapped in or unloaded, a bundle refused, the freezes
	// watched through the API. It may be called with the loader's lock
	// held, so it must not block or call back into the Loader (the sidecar
	// Lease writer only wakes its own goroutine).
	OnReportChanged func()
}

// Loader loads bundles into a decide.Decider: it verifies them against the
// trusted keys, refuses rollbacks (the highest publish counter loaded),
// compiles and serves them with the FrozenAgents watched through the API
// merged in, keeps the last good one in the cache, and remembers the last
// refusal and the FrozenAgent watch's health for /readyz.
type Loader struct {
	cfg     Config
	d       *decide.Decider
	metrics *Metrics
	log     *slog.Logger
	cache   *bundleCache
	mu      sync.Mutex // serialises reloads; decisions never take it

	// counter and counterRevision are the highest publish counter loaded
	// (guarded by mu). rejected is the last refusal since the last load,
	// for /readyz.
	counter         uint64
	counterRevision string
	rejected        atomic.Pointer[Rejection]
	verifications   atomic.Int64 // signatures checked: one per load, never per decision

	// The freezes watched through the API, merged into the compiled bundle
	// with engine's WithFrozen (which always starts from the bundle's own
	// freezes): the namespace's FrozenAgents, every ClusterFrozenAgent
	// watched, and those of them that select the served bundle's namespace
	// labels (nsLabels; nil when the bundle has none). Guarded by mu.
	nsFrozen       []engine.FrozenAgent
	clusterFrozen  []*v1alpha1.ClusterFrozenAgent
	clusterApplied []engine.FrozenAgent
	nsLabels       map[string]string
	labelsJudged   bool
	frozenWatch    frozenWatch
	clusterWatch   frozenWatch
	clusterJudged  atomic.Pointer[clusterJudgement]
	// nsFrozenNames and clusterAppliedNames name (v1alpha1.FreezeName) the
	// freezes in nsFrozen and clusterApplied, for Report; guarded by mu.
	// frozenNames is both, read without mu.
	nsFrozenNames       []string
	clusterAppliedNames []string
	frozenNames         atomic.Pointer[[]string]
	// flagServiceAccount is --service-account, which stands only when the
	// API server says the sidecar runs as no ServiceAccount.
	flagServiceAccount string
}

// New makes a Loader serving into d, counting in m. Nothing is loaded
// until LoadCache, a Source or a Load call.
func New(cfg Config, d *decide.Decider, m *Metrics, log *slog.Logger) *Loader {
	l := &Loader{cfg: cfg, d: d, metrics: m, log: log}
	l.frozenWatch.kind, l.frozenWatch.upGauge, l.frozenWatch.failures = "FrozenAgents", m.FrozenWatchUp, m.FrozenWatchFailures
	l.clusterWatch.kind, l.clusterWatch.upGauge, l.clusterWatch.failures = "ClusterFrozenAgents", m.ClusterFrozenWatchUp, m.ClusterFrozenWatchFailures
	l.clusterJudged.Store(&clusterJudgement{})
	if l.log == nil {
		l.log = slog.Default()
	}
	if cfg.CacheDir != "" {
		l.cache = &bundleCache{dir: cfg.CacheDir, name: CacheFileName(cfg)}
	}
	if cfg.ConfigMap != "" {
		l.initServiceAccount()
	}
	return l
}

// Rejected is the last bundle refused since one last loaded, nil when none
// was.
func (l *Loader) Rejected() *Rejection { return l.rejected.Load() }

// Verifications counts the signatures checked: one per load, never per
// decision.
func (l *Loader) Verifications() int64 { return l.verifications.Load() }

// Load decodes a bundle document (gzip-compressed when gzipped), compiles
// it and swaps it in. A document that does not decode is rejected and
// counted, and the bundle being served stays. With trusted keys, an
// unsigned document is refused: use LoadSigned.
func (l *Loader) Load(raw []byte, gzipped bool, origin string) error {
	return l.LoadSigned(raw, gzipped, nil, origin)
}

// LoadSigned is Load with the bundle's signature document (bundle.sig),
// verified once, here, for the whole bundle: the decision path never sees
// it.
func (l *Loader) LoadSigned(raw []byte, gzipped bool, sig []byte, origin string) error {
	return l.LoadSealed(raw, gzipped, Seal{Sig: sig}, origin)
}

// LoadSealed is LoadSigned with the whole seal: the signature and the
// signing key's endorsements, as the sources read them.
func (l *Loader) LoadSealed(raw []byte, gzipped bool, sl Seal, origin string) error {
	return l.loadSealed(raw, gzipped, sl, origin, "")
}

// loadSealed is LoadSealed; a document whose revision is not wantRevision
// (when not "": the revision a chunked bundle's index names) is refused.
func (l *Loader) loadSealed(raw []byte, gzipped bool, sl Seal, origin, wantRevision string) error {
	doc, err := bundle.ReadDocument(raw, gzipped)
	var b engine.Bundle
	if err == nil {
		if b, err = engine.Decode(doc); err == nil && wantRevision != "" && b.Revision != wantRevision {
			err = fmt.Errorf("%w: the parts reassemble to revision %s, the index names %s", bundle.ErrPartMismatch, b.Revision, wantRevision)
		}
		if err == nil {
			var v verified
			if v, err = l.verify(b.Revision, sl); err == nil {
				if err = l.swap(b, doc, v, origin); err == nil {
					return nil
				}
			}
		}
	}
	l.rejectRevision(origin, b.Revision, err)
	return err
}

func (l *Loader) swap(b engine.Bundle, doc []byte, v verified, origin string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkCounter(b.Revision, v); err != nil {
		return err
	}
	cleared := l.rejected.Swap(nil) != nil
	cur := l.d.State()
	if cur.Compiled != nil && cur.Revision == b.Revision {
		// A resync or a re-read of the same content (or the same content
		// re-signed); only note that the source now vouches for what the
		// cache served.
		if cur.Origin != origin {
			l.d.Serve(cur.Compiled, cur.Revision, origin, cur.LoadedAt)
		}
		if cleared {
			l.reportChanged()
		}
		l.saveCache(doc, v.seal, origin)
		return nil
	}
	started := time.Now()
	compiled, diags := engine.Compile(b)
	now := time.Now()
	l.bundleLabels(&b)
	l.d.Serve(compiled.WithFrozen(l.apiFreezes()), b.Revision, origin, now)
	if l.cfg.OnBundle != nil {
		l.cfg.OnBundle(b)
	}
	l.reportChanged()
	l.metrics.setBundle(b.Revision, now)
	l.log.Info("bundle loaded", "source", origin, "revision", b.Revision, "policies", len(b.Policies),
		"frozenAgents", len(b.FrozenAgents), "compile", now.Sub(started))
	for _, d := range diags {
		// Compile keeps such a policy and denies POLICY_COMPILE_ERROR when
		// evaluation reaches it; the webhook should have stopped it earlier.
		l.log.Warn("policy does not compile; decisions reaching it deny", "source", origin, "diagnostic", d.String())
	}
	l.saveCache(doc, v.seal, origin)
	return nil
}

func (l *Loader) saveCache(doc []byte, sl Seal, origin string) {
	if origin != OriginCache && l.cache != nil {
		if err := l.cache.save(doc, sl); err != nil {
			l.log.Warn("caching the bundle failed", "dir", l.cache.dir, "err", err)
		}
	}
}

// Unload drops the bundle because its source says there is none (the
// bundle ConfigMap was deleted): from now on every decision is deny
// NO_POLICIES, and the cache is cleared so a restart does not resurrect it.
func (l *Loader) Unload(origin, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cache != nil {
		if err := l.cache.remove(); err != nil {
			l.log.Warn("removing the cached bundle failed", "dir", l.cache.dir, "err", err)
		}
	}
	if !l.d.Ready() {
		return
	}
	l.d.Serve(nil, "", origin, time.Now())
	l.reportChanged()
	l.metrics.setBundle("", time.Time{})
	l.log.Warn("bundle unloaded; every decision is deny "+string(engine.CodeNoPolicies), "source", origin, "why", why)
}

func (l *Loader) reject(origin string, err error) { l.rejectRevision(origin, "", err) }

// rejectRevision records a refusal of the bundle revision ("" when it did
// not decode far enough to name one).
func (l *Loader) rejectRevision(origin, revision string, err error) {
	reason := RejectReason(err)
	l.metrics.ReloadFailures.WithLabelValues(origin).Inc()
	l.metrics.Rejected.WithLabelValues(reason).Inc()
	l.rejected.Store(&Rejection{Reason: reason, Source: origin, Revision: revision, Error: err.Error(), At: time.Now().UTC()})
	l.reportChanged()
	l.log.Error("bundle rejected; the last good bundle keeps serving", "source", origin, "revision", revision,
		"serving", l.d.State().Revision, "reason", reason, "err", err, "corrupt", errors.Is(err, engine.ErrCorruptBundle))
}

// LoadCache serves the cached bundle, if any, until the source answers.
func (l *Loader) LoadCache() {
	if l.cache == nil {
		return
	}
	l.loadCounter()
	doc, sl, err := l.cache.read()
	switch {
	case err != nil:
		l.reject(OriginCache, err)
	case doc != nil:
		_ = l.LoadSealed(doc, false, sl, OriginCache)
	}
}
