package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// shutdownGrace bounds how long in-flight requests and the decision log get
// to finish after the process is asked to stop.
const shutdownGrace = 5 * time.Second

type source interface {
	run(ctx context.Context, s *Server) error
}

func newSource(o Options) (source, error) {
	switch {
	case o.ConfigMap != "":
		return newConfigMapSource(o.ConfigMap, o.Kubeconfig)
	case o.BundleDir != "":
		return newDirSource(o.BundleDir, o.PollInterval), nil
	default:
		return newFileSource(o.BundleFile, o.PollInterval), nil
	}
}

// Run serves decisions until ctx ends or the listener or the source fails.
// onListen, when not nil, is told the bound address (tests listen on port
// 0).
func Run(ctx context.Context, opts Options, onListen func(net.Addr)) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	src, err := newSource(opts)
	if err != nil {
		return err
	}
	s, err := New(opts)
	if err != nil {
		return err
	}
	s.loadCache()
	ln, err := listen(opts.Listen)
	if err != nil {
		_ = s.Close(context.Background())
		return err
	}
	s.log.Info("serving decisions", "addr", ln.Addr().String(), "agentId", opts.AgentID)
	if onListen != nil {
		onListen(ln.Addr())
	}
	servers := []served{{&http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}, ln}}
	if opts.MetricsListen != "" {
		mln, err := listen(opts.MetricsListen)
		if err != nil {
			_ = ln.Close()
			_ = s.Close(context.Background())
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		s.log.Info("serving metrics and health", "addr", mln.Addr().String())
		if opts.onMetricsListen != nil {
			opts.onMetricsListen(mln.Addr())
		}
		servers = append(servers, served{&http.Server{Handler: s.opsHandler(), ReadHeaderTimeout: 5 * time.Second}, mln})
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.run(ctx, s) }()
	srvDone := make(chan error, len(servers))
	for _, sv := range servers {
		go func() { srvDone <- sv.srv.Serve(sv.ln) }()
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
	for _, sv := range servers {
		errs = append(errs, sv.srv.Shutdown(grace))
	}
	cancel()
	if !srcFinished {
		errs = append(errs, <-srcDone)
	}
	for ; srvFinished < len(servers); srvFinished++ {
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
	srv *http.Server
	ln  net.Listener
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
