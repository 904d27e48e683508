package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/toolgate/toolgate/engine"
)

// Where an injected sidecar serves when TOOLGATE_URL says nothing: its
// socket if the Pod mounts it, its loopback port otherwise.
const (
	defaultSocket = "/var/run/toolgate/toolgate.sock"
	defaultTCP    = "http://127.0.0.1:8181"
)

// maxSidecarAnswer bounds the answer read: a decision is a few hundred
// bytes, and a bigger one is not a sidecar talking.
const maxSidecarAnswer = 1 << 20

// sidecarURL finds the sidecar as every toolgate client does: the explicit
// URL, else TOOLGATE_URL, else the socket if it exists, else the port.
func sidecarURL(explicit string) string {
	if explicit != "" {
		return explicit
	}
	if env := os.Getenv("TOOLGATE_URL"); env != "" {
		return env
	}
	if _, err := os.Stat(defaultSocket); err == nil {
		return "unix://" + defaultSocket
	}
	return defaultTCP
}

// sidecarTransport turns a sidecar URL into the evaluate endpoint and the
// client that reaches it: unix:///path (or unix:/path) dials the socket.
func sidecarTransport(raw string) (string, *http.Client, error) {
	if path, ok := strings.CutPrefix(raw, "unix:"); ok {
		path = strings.TrimPrefix(path, "//")
		if !strings.HasPrefix(path, "/") {
			return "", nil, fmt.Errorf("sidecar URL %q: a Unix socket URL needs an absolute path (unix:///path)", raw)
		}
		var d net.Dialer
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		}}
		// The host is ignored: the dialer always reaches the socket.
		return "http://sidecar/v1/evaluate", &http.Client{Transport: tr}, nil
	}
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		return "", nil, fmt.Errorf("sidecar URL %q: use http://host:port or unix:///path", raw)
	}
	return strings.TrimSuffix(raw, "/") + "/v1/evaluate", http.DefaultClient, nil
}

// askSidecar posts the request and returns the sidecar's decision, or a
// deny saying why there is none: the hook never lets a call through that
// toolgate did not allow.
func askSidecar(ctx context.Context, explicit string, req hookRequest) hookResult {
	raw := sidecarURL(explicit)
	endpoint, client, err := sidecarTransport(raw)
	if err != nil {
		return failClosed("%v", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(req.body))
	if err != nil {
		return failClosed("toolgate sidecar %s: %v", raw, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hreq)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return failClosed("toolgate sidecar %s did not answer in time", raw)
		}
		return failClosed("toolgate sidecar %s unreachable: %v", raw, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSidecarAnswer))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return failClosed("toolgate sidecar %s did not answer in time", raw)
		}
		return failClosed("toolgate sidecar %s: reading the answer: %v", raw, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return failClosed("toolgate sidecar %s answered %s: %s", raw, resp.Status, msg)
	}
	var res hookResult
	if err := json.Unmarshal(body, &res); err != nil {
		return failClosed("toolgate sidecar %s: malformed answer: %v", raw, err)
	}
	if res.Decision != engine.Allow && res.Decision != engine.Deny {
		return failClosed("toolgate sidecar %s: answer has decision %q", raw, res.Decision)
	}
	return res
}
