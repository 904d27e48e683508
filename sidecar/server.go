package sidecar

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/usage"
)

// CodeInternalError is the code of a deny the sidecar made because it
// failed, not because a policy said so.
const CodeInternalError engine.Code = "INTERNAL_ERROR"

// CodeOverloaded is the code of a deny the sidecar made because it was
// already evaluating --max-evaluations requests: it answers at once rather
// than queue, and never allows.
const CodeOverloaded engine.Code = "OVERLOADED"

// Server answers decisions from the bundle it currently holds. It is an
// http.Handler; Run wires it to a listener and a bundle source.
type Server struct {
	opts      Options
	log       *slog.Logger
	state     atomic.Pointer[state]
	metrics   *metrics
	decisions *decisionLog
	cache     *bundleCache
	metricsH  http.Handler
	bufs      sync.Pool
	loadMu    sync.Mutex // serialises reloads; decisions never take it

	// trust, when set, are the keys a bundle must be signed with, for
	// namespace; counter and counterRevision are the highest publish
	// counter loaded (guarded by loadMu). rejected is the last refusal
	// since the last load, for /readyz.
	trust           *bundle.TrustedKeys
	namespace       string
	counter         uint64
	counterRevision string
	rejected        atomic.Pointer[rejection]
	verifications   atomic.Int64 // signatures checked: one per load, never per decision

	// apiFrozen are the FrozenAgents watched through the API, merged into
	// state.compiled with engine's WithFrozen (which always starts from the
	// bundle's own freezes). Guarded by loadMu.
	apiFrozen   []engine.FrozenAgent
	frozenWatch frozenWatch

	// binding is what replaces a request's agent_id, roles and
	// environment (--agent-id, --roles, --environment).
	binding binding
	// usage counts the calls this sidecar allowed, for rateLimit and
	// tokenBudget; now is the clock they are decided and counted at (nil:
	// the real one).
	usage *usage.Ledger
	now   func() time.Time
	// Decision ids are a per-process random prefix and a counter: unique
	// across restarts and replicas without a random read per decision.
	idPrefix string
	nextID   atomic.Uint64
	// evaluating counts the requests being decoded and evaluated, up to
	// maxEvaluating.
	evaluating    atomic.Int64
	maxEvaluating int64
	// bodyBytes is what request bodies being read and decided hold of
	// bodyBudget (--max-body-bytes-in-flight); see reserveBody.
	bodyBytes  atomic.Int64
	bodyBudget int64

	// mcp is the MCP proxy, nil without --mcp-upstream (mcp_proxy.go).
	mcp *mcpProxy

	// beforeEvaluate lets tests make the handler fail; nil in production.
	beforeEvaluate func(engine.Request)
	// onBodyReserve is told the bytes in flight after each body
	// reservation; nil in production.
	onBodyReserve func(inFlight int64)
}

// state is what one decision reads with a single atomic load.
type state struct {
	compiled *engine.Compiled // nil: no bundle, deny NO_POLICIES
	revision string
	origin   string
	loadedAt time.Time
	// suffix closes a response: `,"bundleRevision":...,"decisionId":"<prefix>`,
	// encoded once per load instead of once per decision.
	suffix []byte
}

func newState(c *engine.Compiled, revision, origin string, at time.Time, idPrefix string) *state {
	st := &state{compiled: c, revision: revision, origin: origin, loadedAt: at}
	st.suffix = append(st.suffix, `,"bundleRevision":`...)
	if revision == "" {
		st.suffix = append(st.suffix, "null"...)
	} else {
		st.suffix = engine.AppendJSONString(st.suffix, revision)
	}
	st.suffix = append(st.suffix, `,"decisionId":"`...)
	st.suffix = append(st.suffix, idPrefix...)
	return st
}

// New builds a server with no bundle loaded (every decision is deny
// NO_POLICIES until LoadDocument). It starts the decision log writers; Close
// stops them. It does not check the bundle source options: Run does.
func New(opts Options) (*Server, error) {
	if err := opts.validateServing(); err != nil {
		return nil, err
	}
	var err error
	s := &Server{opts: opts, log: opts.Logger, maxEvaluating: int64(opts.MaxEvaluations),
		bodyBudget: int64(opts.MaxBodyBytesInFlight), beforeEvaluate: opts.beforeEvaluate, onBodyReserve: opts.onBodyReserve}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	s.binding = newBinding(opts)
	s.now = opts.now
	if s.usage, err = usage.New(opts.UsageMaxKeys, opts.UsageMaxEventsPerKey); err != nil {
		return nil, err
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("seeding decision ids: %w", err)
	}
	s.idPrefix = hex.EncodeToString(rnd[:]) + "-"
	s.state.Store(newState(nil, "", "", time.Time{}, s.idPrefix))
	s.metrics = newMetrics(s.bundleAge, func() float64 { return float64(s.bodyBytes.Load()) }, s.usage)
	s.metricsH = promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})
	s.bufs.New = func() any { return new(buffers) }
	if opts.CacheDir != "" {
		s.cache = &bundleCache{dir: opts.CacheDir, name: cacheFileName(opts)}
	}
	s.decisions = newDecisionLog(opts, s.metrics, s.log)
	if s.trust, err = opts.loadTrustedKeys(); err != nil {
		_ = s.decisions.close(context.Background())
		return nil, err
	}
	if ups, _ := opts.MCP.parse(); len(ups) > 0 {
		s.mcp = newMCPProxy(s, ups)
	}
	s.namespace = opts.bundleNamespace()
	if s.trust == nil {
		s.log.Warn("no --trusted-keys: unsigned bundles are accepted (local use with `toolgate bundle` output only)")
	} else {
		s.log.Info("bundles must be signed by a trusted key", "keys", s.trust.IDs(), "namespace", s.namespace)
	}
	return s, nil
}

// Close flushes the decision log, waiting at most until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	if s.mcp != nil {
		s.mcp.close()
	}
	return s.decisions.close(ctx)
}

// Ready reports whether a bundle is loaded.
func (s *Server) Ready() bool { return s.state.Load().compiled != nil }

// Revision is the revision being served, "" when none is.
func (s *Server) Revision() string { return s.state.Load().revision }

func (s *Server) bundleAge() float64 {
	st := s.state.Load()
	if st.compiled == nil {
		return -1
	}
	return time.Since(st.loadedAt).Seconds()
}

// ServeHTTP routes four fixed paths with a switch: every answer, a 404 or a
// 405 included, is JSON that names what to do instead, which
// http.ServeMux's plain-text errors would not be.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/evaluate":
		if r.Method != http.MethodPost {
			s.metrics.badRequests.Inc()
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "use POST for /v1/evaluate")
			return
		}
		s.evaluate(w, r)
	case "/healthz":
		if !getOrHead(w, r) {
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	case "/readyz":
		if !getOrHead(w, r) {
			return
		}
		st := s.state.Load()
		body := map[string]any{"ready": st.compiled != nil}
		if rej := s.rejected.Load(); rej != nil {
			// The last good bundle keeps serving; say what was refused.
			body["lastRejected"] = rej
		}
		if st.compiled == nil {
			body["reason"] = "no bundle is loaded"
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
		body["bundleRevision"], body["source"] = st.revision, st.origin
		if fw := s.frozenWatch.status(); fw != nil {
			body["frozenAgentWatch"] = fw
		}
		writeJSON(w, http.StatusOK, body)
	case "/metrics":
		if !getOrHead(w, r) {
			return
		}
		s.metricsH.ServeHTTP(w, r)
	default:
		if s.mcp != nil && strings.HasPrefix(r.URL.Path, mcpPathPrefix) {
			// The proxy on the Unix socket too, which code in the Pod
			// cannot take over as it can a loopback port.
			s.mcp.ServeHTTP(w, r)
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %q; try POST /v1/evaluate", r.URL.Path))
	}
}

func getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("use GET for %s", r.URL.Path))
	return false
}

// jsonContentType is assigned as-is to response headers, so the hot path
// does not build a new slice per response.
var jsonContentType = []string{"application/json"}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"encoding the response failed"}`)
		status = http.StatusInternalServerError
	}
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
