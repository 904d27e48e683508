package client

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Where the sidecar is found when nothing names it: the socket injected
// sidecars serve, else their loopback port.
const (
	DefaultSocket = "/var/run/toolgate/toolgate.sock"
	DefaultURL    = "http://127.0.0.1:8181"
	// EnvURL names the sidecar for every client (injected Pods carry it).
	EnvURL = "TOOLGATE_URL"
)

// endpoint is where requests go: base is the URL prefix of /v1/evaluate
// and socket, when set, the Unix socket every connection dials instead.
type endpoint struct {
	base   string
	socket string
}

// discover finds the sidecar as every toolgate client does: the explicit
// URL, else TOOLGATE_URL, else the socket when it exists, else
// http://127.0.0.1:8181.
func discover(explicit string) (endpoint, error) {
	if explicit != "" {
		return parseURL("Options.URL", explicit)
	}
	if env := os.Getenv(EnvURL); env != "" {
		return parseURL(EnvURL, env)
	}
	if _, err := os.Stat(DefaultSocket); err == nil {
		return endpoint{base: "http://sidecar", socket: DefaultSocket}, nil
	}
	return endpoint{base: DefaultURL}, nil
}

// parseURL reads unix:///path (or unix:/path, as the sidecar's --listen
// takes it) or http(s)://host:port[/prefix]; from names the setting in
// errors.
func parseURL(from, raw string) (endpoint, error) {
	if path, ok := strings.CutPrefix(raw, "unix://"); ok {
		return unixEndpoint(from, raw, path)
	}
	if path, ok := strings.CutPrefix(raw, "unix:"); ok {
		return unixEndpoint(from, raw, path)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, fmt.Errorf("toolgate: %s %q is not a URL: %w", from, raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return endpoint{}, fmt.Errorf("toolgate: %s %q: want unix:///path/to.sock or http://host:port", from, raw)
	}
	if u.Host == "" {
		return endpoint{}, fmt.Errorf("toolgate: %s %q has no host: want http://host:port", from, raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return endpoint{}, fmt.Errorf("toolgate: %s %q: a sidecar URL has no user, query or fragment", from, raw)
	}
	return endpoint{base: strings.TrimSuffix(u.Scheme+"://"+u.Host+u.EscapedPath(), "/")}, nil
}

func unixEndpoint(from, raw, path string) (endpoint, error) {
	if !strings.HasPrefix(path, "/") {
		return endpoint{}, fmt.Errorf("toolgate: %s %q: a socket path must be absolute, as in unix:///var/run/toolgate/toolgate.sock", from, raw)
	}
	// The host name is ignored on a socket; it only makes a valid URL.
	return endpoint{base: "http://sidecar", socket: path}, nil
}

// String is the endpoint as a URL, for errors and reasons.
func (e endpoint) String() string {
	if e.socket != "" {
		return "unix://" + e.socket
	}
	return e.base
}
