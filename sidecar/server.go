package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundlesource"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/mcp"
	"github.com/toolgate/toolgate/sidecarlease"
	"github.com/toolgate/toolgate/usage"
)

// CodeInternalError, CodeOverloaded and CodeUsageUnavailable are the codes
// of the denies the sidecar makes itself (decide owns them).
const (
	CodeInternalError    = decide.CodeInternalError
	CodeOverloaded       = decide.CodeOverloaded
	CodeUsageUnavailable = decide.CodeUsageUnavailable
)

// Server answers decisions from the bundle it currently holds. It is an
// http.Handler; Run wires it to a listener and a bundle source.
type Server struct {
	opts Options
	log  *slog.Logger
	// d is the decision core: bundle served, binding, usage, guard, log.
	d        *decide.Decider
	metrics  *metrics
	metricsH http.Handler
	// loader loads bundles into d: trust, rollback counter, cache, API
	// freezes; the sources feed it (package bundlesource).
	loader *bundlesource.Loader

	// mcp is the MCP proxy, nil without --mcp-upstream.
	mcp *mcp.Proxy
	// ledger is the decision core's usage ledger, closed last (its state
	// file holds every call counted).
	ledger *usage.Ledger
	// lease writes the sidecar's Lease, nil without --lease-pod.
	lease *sidecarlease.Writer
	// usageStore counts shared limits, nil without --usage-store.
	usageStore *usageStore
}

// New builds a server with no bundle loaded (every decision is deny
// NO_POLICIES until LoadDocument). It starts the decision log writers; Close
// stops them. It does not check the bundle source options: Run does.
func New(opts Options) (*Server, error) {
	if err := opts.validateServing(); err != nil {
		return nil, err
	}
	var err error
	s := &Server{opts: opts, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ledger, err := s.openLedger()
	if err != nil {
		return nil, err
	}
	s.ledger = ledger
	var bodies *decide.BodyBudget
	s.metrics = newMetrics(s.bundleAge, func() float64 { return float64(bodies.Held()) }, ledger)
	s.metricsH = promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})
	if s.usageStore, err = s.openUsageStore(); err != nil {
		_ = ledger.CloseState()
		return nil, err
	}
	cfg := opts.deciderConfig()
	if s.usageStore != nil {
		cfg.SharedStore, cfg.StoreMetrics = s.usageStore.store, s.usageStore.metrics
	}
	log := decisionlog.New(opts.decisionLogConfig(), s.metrics.logDropped, s.log)
	if s.d, err = decide.New(cfg, ledger, log, s.metrics.Metrics, s.log); err != nil {
		_ = log.Close(context.Background())
		_ = ledger.CloseState()
		_ = s.usageStore.close()
		return nil, err
	}
	bodies = s.d.Bodies
	src := opts.sourceConfig()
	if src.Trust, err = opts.loadTrustedKeys(); err != nil {
		_ = log.Close(context.Background())
		_ = ledger.CloseState()
		_ = s.usageStore.close()
		return nil, err
	}
	s.mcp, _ = mcp.New(s.d, opts.MCP, s.metrics.registry, s.log, opts.ReadTimeout) // validateServing has checked the flags
	if s.mcp != nil {
		src.OnBundle, src.OnFreezesChanged = s.mcp.BundleLoaded, s.mcp.FreezesChanged
	}
	if opts.LeasePod != "" {
		s.lease = sidecarlease.New(sidecarlease.Config{
			Pod:     sidecarlease.Pod{Namespace: src.Namespace, Name: opts.LeasePod, UID: types.UID(opts.LeasePodUID)},
			Report:  func() v1alpha1.SidecarReport { return s.loader.Report().SidecarReport(opts.Version) },
			Written: func(result string) { s.metrics.leaseWrites.WithLabelValues(result).Inc() },
			Log:     s.log,
		})
		src.OnReportChanged = s.lease.Changed
	}
	s.loader = bundlesource.New(src, s.d, s.metrics.bundle, s.log)
	if src.Trust == nil {
		s.log.Warn("no --trusted-keys: unsigned bundles are accepted (local use with `toolgate bundle` output only)")
	} else {
		s.log.Info("bundles must be signed by a trusted key", "keys", src.Trust.IDs(), "namespace", src.Namespace)
	}
	return s, nil
}

// Close flushes the decision log, waiting at most until ctx ends, and
// closes the usage state file.
func (s *Server) Close(ctx context.Context) error {
	if s.mcp != nil {
		s.mcp.Close()
	}
	return errors.Join(s.d.Log().Close(ctx), s.ledger.CloseState(), s.usageStore.close())
}

// openLedger makes the usage ledger and, with --usage-state, restores it
// from its file. A file that could not be read is logged as an error: the
// limits it would have held fail closed (usage.StateLoad).
func (s *Server) openLedger() (*usage.Ledger, error) {
	o := s.opts
	ledger, err := usage.New(o.UsageMaxKeys, o.UsageMaxEventsPerKey)
	if err != nil || o.UsageState == "" {
		return ledger, err
	}
	now := time.Now
	if o.now != nil {
		now = o.now
	}
	load, err := ledger.OpenState(o.UsageState, now())
	switch {
	case err != nil:
		return nil, err
	case load.Unreadable != nil:
		s.log.Error("the usage state file could not be read: every rate limit and token budget whose window reaches back before now is denied "+string(decide.CodeUsageUnavailable)+" until that window has passed",
			"file", o.UsageState, "error", load.Unreadable, "unknownBefore", load.UnknownBefore, "movedTo", load.MovedTo)
	default:
		s.log.Info("usage counters restored", "file", o.UsageState, "counters", load.Counters, "calls", load.Calls)
	}
	return ledger, nil
}

// LoadDocument decodes a bundle document (gzip-compressed when gzipped),
// compiles it and swaps it in. A document that does not decode is rejected
// and counted, and the bundle being served stays. With trusted keys, an
// unsigned document is refused: use LoadSignedDocument.
func (s *Server) LoadDocument(raw []byte, gzipped bool) error {
	return s.loader.Load(raw, gzipped, bundlesource.OriginAPI)
}

// LoadSignedDocument is LoadDocument with the bundle's signature document
// (bundle.sig), checked against the trusted keys when there are any.
func (s *Server) LoadSignedDocument(raw []byte, gzipped bool, sig []byte) error {
	return s.loader.LoadSigned(raw, gzipped, sig, bundlesource.OriginAPI)
}

// Ready reports whether a bundle is loaded.
func (s *Server) Ready() bool { return s.d.Ready() }

// Revision is the revision being served, "" when none is.
func (s *Server) Revision() string { return s.d.State().Revision }

func (s *Server) bundleAge() float64 {
	st := s.d.State()
	if st.Compiled == nil {
		return -1
	}
	return time.Since(st.LoadedAt).Seconds()
}

// ServeHTTP routes four fixed paths with a switch: every answer, a 404 or a
// 405 included, is JSON that names what to do instead, which
// http.ServeMux's plain-text errors would not be.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/evaluate":
		if r.Method != http.MethodPost {
			s.d.BadRequest()
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
		st := s.d.State()
		body := map[string]any{"ready": st.Compiled != nil}
		if rej := s.loader.Rejected(); rej != nil {
			// The last good bundle keeps serving; say what was refused.
			body["lastRejected"] = rej
		}
		if st.Compiled == nil {
			body["reason"] = "no bundle is loaded"
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
		body["bundleRevision"], body["source"] = st.Revision, st.Origin
		if err := s.usageStore.unavailable(); err != nil {
			// Calls under shared limits are denied while it is down;
			// the others are still decided, but the Pod is not ready.
			body["ready"] = false
			body["reason"] = "the usage store (--usage-store) does not answer: " + err.Error()
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
		if fw := s.loader.FrozenWatchStatus(); fw != nil {
			body["frozenAgentWatch"] = fw
		}
		if cw := s.loader.ClusterFrozenWatchStatus(); cw != nil {
			body["clusterFrozenAgentWatch"] = cw
		}
		writeJSON(w, http.StatusOK, body)
	case "/metrics":
		if !getOrHead(w, r) {
			return
		}
		s.metricsH.ServeHTTP(w, r)
	default:
		if s.mcp != nil && strings.HasPrefix(r.URL.Path, mcp.PathPrefix) {
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
