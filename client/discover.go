package client

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/toolgate/toolgate/endpoint"
)

// Where the sidecar is found when nothing names it: the socket injected
// sidecars serve, else their loopback port (the endpoint package's, named
// here for the client's users).
const (
	DefaultSocket = endpoint.DefaultSocket
	DefaultURL    = endpoint.DefaultURL
	// EnvURL names the sidecar for every client (injected Pods carry it).
	EnvURL = endpoint.EnvURL
)

// sidecarAt is where requests go: base is the URL prefix of /v1/evaluate
// and socket, when set, the Unix socket every connection dials instead.
type sidecarAt struct {
	base   string
	socket string
}

// discover finds the sidecar as every toolgate client does: the explicit
// URL, else TOOLGATE_URL, else the socket when it exists, else
// DefaultURL.
func discover(explicit string) (sidecarAt, error) {
	if explicit != "" {
		return parseURL("Options.URL", explicit)
	}
	if env := os.Getenv(EnvURL); env != "" {
		return parseURL(EnvURL, env)
	}
	if _, err := os.Stat(DefaultSocket); err == nil {
		return sidecarAt{base: "http://sidecar", socket: DefaultSocket}, nil
	}
	return sidecarAt{base: DefaultURL}, nil
}

// parseURL reads unix:///path (or unix:/path, as the sidecar's --listen
// takes it: endpoint.ParseUnix) or http(s)://host:port[/prefix]; from
// names the setting in errors.
func parseURL(from, raw string) (sidecarAt, error) {
	if path, isUnix, err := endpoint.ParseUnix(raw); isUnix {
		return unixEndpoint(from, raw, path, err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return sidecarAt{}, fmt.Errorf("toolgate: %s %q is not a URL: %w", from, raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return sidecarAt{}, fmt.Errorf("toolgate: %s %q: want unix:///path/to.sock or http://host:port", from, raw)
	}
	if u.Host == "" {
		return sidecarAt{}, fmt.Errorf("toolgate: %s %q has no host: want http://host:port", from, raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return sidecarAt{}, fmt.Errorf("toolgate: %s %q: a sidecar URL has no user, query or fragment", from, raw)
	}
	return sidecarAt{base: strings.TrimSuffix(u.Scheme+"://"+u.Host+u.EscapedPath(), "/")}, nil
}

// unixEndpoint dials the socket at path, which must be absolute: a client
// does not depend on its working directory.
func unixEndpoint(from, raw, path string, err error) (sidecarAt, error) {
	if err != nil || !strings.HasPrefix(path, "/") {
		return sidecarAt{}, fmt.Errorf("toolgate: %s %q: a socket path must be absolute, as in %s", from, raw, endpoint.UnixURL(DefaultSocket))
	}
	// The host name is ignored on a socket; it only makes a valid URL.
	return sidecarAt{base: "http://sidecar", socket: path}, nil
}

// String is the endpoint as a URL, for errors and reasons.
func (e sidecarAt) String() string {
	if e.socket != "" {
		return endpoint.UnixURL(e.socket)
	}
	return e.base
}
