package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/scenario"
	"github.com/toolgate/toolgate/sidecar"
)

// sampleBody hits rule 500 of the generated bundle.
const sampleBody = scenario.Request

// generateBundle is the FINDINGS reference scenario with rules rules.
func generateBundle(rules int) ([]byte, error) {
	doc, _, err := engine.Encode(scenario.Reference(rules))
	return doc, err
}

// startSelf runs a real sidecar (sidecar.Run, --bundle-file mode, the
// default limits) in this process on a loopback port, and a Unix socket
// too, and waits until it is ready. It returns the address to drive: the
// port, or the socket when viaSocket. Decision log lines are formatted as
// in production and written to io.Discard, unless logMode is "none".
func startSelf(ctx context.Context, rules int, logMode string, viaSocket bool) (string, func() error, error) {
	doc, err := generateBundle(rules)
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "loadgen-")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "bundle.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		return "", nil, err
	}
	o := sidecar.DefaultOptions()
	sock := filepath.Join(dir, "toolgate.sock")
	o.Listen, o.BundleFile = []string{"127.0.0.1:0", "unix://" + sock}, path
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o.DecisionLogWriter = io.Discard
	if logMode == "none" {
		o.DecisionLog = sidecar.DecisionLogNone
	}
	ctx, cancel := context.WithCancel(ctx)
	addrs := make(chan net.Addr, len(o.Listen))
	done := make(chan error, 1)
	go func() { done <- sidecar.Run(ctx, o, func(a net.Addr) { addrs <- a }) }()
	stop := func() error {
		cancel()
		err := <-done
		_ = os.RemoveAll(dir)
		return err
	}
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a.String()
	case err := <-done:
		cancel()
		return "", nil, fmt.Errorf("the sidecar did not start: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if viaSocket {
					return "unix:" + sock, stop, nil
				}
				return base, stop, nil
			}
		}
		if time.Now().After(deadline) {
			return "", nil, errors.Join(fmt.Errorf("the sidecar did not become ready"), stop())
		}
	}
}
