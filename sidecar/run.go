package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/bundlesource"
	"github.com/toolgate/toolgate/internal/httploop"
)

// shutdownGrace bounds how long in-flight requests and the decision log get
// to finish after the process is asked to stop.
const shutdownGrace = 5 * time.Second

// listenRetry is how often a squatted TCP address is tried again.
const listenRetry = 2 * time.Second

// Run serves decisions until ctx ends or a listener or the source fails.
// onListen, when not nil, is told each bound address as it opens (tests
// listen on port 0).
func Run(ctx context.Context, opts Options, onListen func(net.Addr)) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	src, err := bundlesource.NewSource(opts.sourceConfig())
	if err != nil {
		return err
	}
	s, err := New(opts)
	if err != nil {
		return err
	}
	if opts.BundleDir != "" {
		if err := checkBundleDir(opts.BundleDir, s.log); err != nil {
			_ = s.Close(context.Background())
			return err
		}
	}
	s.loader.LoadCache()
	lns, squatted, err := s.openListeners(opts.Listen)
	if err != nil {
		_ = s.Close(context.Background())
		return err
	}
	decisions := s.decisionServer()
	servers := []server{decisions}
	var serving []served
	for _, ln := range lns {
		s.log.Info("serving decisions", "addr", ln.Addr().String(), "agentId", opts.AgentID,
			"roles", opts.Roles, "environment", opts.Environment)
		if onListen != nil {
			onListen(ln.Addr())
		}
		serving = append(serving, served{decisions, ln})
	}
	if opts.MetricsListen != "" {
		mln, err := httploop.Listen(opts.MetricsListen)
		if err != nil {
			for _, ln := range lns {
				_ = ln.Close()
			}
			_ = s.Close(context.Background())
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		s.log.Info("serving metrics and health", "addr", mln.Addr().String())
		if opts.onMetricsListen != nil {
			opts.onMetricsListen(mln.Addr())
		}
		ops := s.httpServer(s.opsHandler())
		servers = append(servers, ops)
		serving = append(serving, served{ops, httploop.LimitConns(mln, opts.MetricsMaxConnections, 0, s.metrics.conns(), opts.MetricsListen)})
	}
	mcpSrv, mcpLn, err := s.openMCP()
	if err != nil {
		for _, sv := range serving {
			_ = sv.ln.Close()
		}
		_ = s.Close(context.Background())
		return err
	}
	if mcpSrv != nil {
		servers = append(servers, mcpSrv)
		serving = append(serving, served{mcpSrv, mcpLn})
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := errors.Join(s.startApprovals(ctx, src), s.startDriftEvents(ctx, src), s.startLease(ctx, src)); err != nil {
		for _, sv := range serving {
			_ = sv.ln.Close()
		}
		_ = s.Close(context.Background())
		return err
	}
	if s.usageStore != nil {
		go s.usageStore.watch(ctx, s)
	}
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.Run(ctx, s.loader) }()
	srvDone := make(chan error, len(serving)+len(squatted))
	for _, sv := range serving {
		go func() { srvDone <- sv.srv.Serve(sv.ln) }()
	}
	for _, addr := range squatted {
		go func() { srvDone <- s.retryListen(ctx, addr, decisions, onListen) }()
	}

	var runErr error
	srcFinished, srvFinished := false, 0
	select {
	case <-ctx.Done():
	case runErr = <-srcDone:
		srcFinished = true
	case runErr = <-srvDone:
		srvFinished = 1
	}
	grace, stop := context.WithTimeout(context.Background(), shutdownGrace)
	defer stop()
	errs := []error{runErr}
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(grace))
	}
	cancel()
	if !srcFinished {
		errs = append(errs, <-srcDone)
	}
	for ; srvFinished < cap(srvDone); srvFinished++ {
		errs = append(errs, <-srvDone)
	}
	errs = append(errs, s.Close(grace))
	for i, err := range errs {
		if errors.Is(err, http.ErrServerClosed) {
			errs[i] = nil
		}
	}
	return errors.Join(errs...)
}

type served struct {
	srv server
	ln  net.Listener
}

// server is what Run starts and stops: net/http's, or the MCP proxy's own
// (httploop.Server).
type server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// decisionServer serves the --listen addresses: decisions, probes,
// metrics, and the MCP paths on the Unix socket. It is httploop's, not
// net/http's: the same parser for any head it does not know, the same
// limits, half the CPU per decision (docs/performance.md).
func (s *Server) decisionServer() *httploop.Server {
	o := s.opts
	return &httploop.Server{Handler: s,
		ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, IdleTimeout: o.IdleTimeout, Log: s.log}
}

// httpServer serves h (the --metrics-listen address) with the timeouts
// and connection tracking the decision listeners have.
func (s *Server) httpServer(h http.Handler) *http.Server {
	o := s.opts
	return &http.Server{Handler: h,
		ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, IdleTimeout: o.IdleTimeout, MaxHeaderBytes: httploop.MaxHeaderBytes,
		ConnState: httploop.TrackConnState, ConnContext: httploop.WithConn,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
}

// openListeners opens every --listen address, each behind its own
// connection limit. A TCP address another process holds is returned in
// squatted, to be retried, when a Unix socket opened: the socket's clients
// keep their sidecar. Any other failure closes what was opened and fails.
func (s *Server) openListeners(addrs []string) (lns []net.Listener, squatted []string, err error) {
	var errs []error
	var taken []string
	sockets := 0
	for _, addr := range addrs {
		ln, err := httploop.Listen(addr)
		switch {
		case err == nil:
			if _, isUnix, _ := socketPath(addr); isUnix {
				sockets++
			}
			s.metrics.listenerUp.WithLabelValues(addr).Set(1)
			lns = append(lns, httploop.LimitConns(ln, s.opts.MaxConnections, s.opts.MaxMCPConnections, s.metrics.conns(), addr))
		case httploop.Squattable(addr, err):
			taken = append(taken, addr)
			errs = append(errs, fmt.Errorf("--listen %s: %w", addr, err))
		default:
			errs = append(errs, fmt.Errorf("--listen %s: %w", addr, err))
		}
	}
	if len(errs) > len(taken) || (len(taken) > 0 && sockets == 0) {
		for _, ln := range lns {
			_ = ln.Close()
		}
		return nil, nil, errors.Join(errs...)
	}
	for _, addr := range taken {
		s.metrics.listenerUp.WithLabelValues(addr).Set(0)
		s.log.Error("another process holds this address: whatever answers there is NOT toolgate; serving on the Unix socket and retrying",
			"addr", addr, "retry", listenRetry)
	}
	return lns, taken, nil
}

// retryListen tries a squatted address until it is free, then serves it;
// nil when ctx ends first.
func (s *Server) retryListen(ctx context.Context, addr string, srv server, onListen func(net.Addr)) error {
	t := time.NewTicker(listenRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ln, err := httploop.Listen(addr)
		if err != nil {
			continue
		}
		s.metrics.listenerUp.WithLabelValues(addr).Set(1)
		s.log.Info("serving decisions; the address is free again", "addr", ln.Addr().String())
		if onListen != nil {
			onListen(ln.Addr())
		}
		return srv.Serve(httploop.LimitConns(ln, s.opts.MaxConnections, s.opts.MaxMCPConnections, s.metrics.conns(), addr))
	}
}

// opsHandler serves what Prometheus and kubelet need on an address they can
// reach (the decision listener is usually the Pod's loopback), and never
// decisions.
func (s *Server) opsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics", "/healthz", "/readyz":
			s.ServeHTTP(w, r)
		default:
			writeError(w, http.StatusNotFound, fmt.Sprintf("%q is not served here: this address serves /metrics, /healthz and /readyz; decisions are on --listen", r.URL.Path))
		}
	})
}
