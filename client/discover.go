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
		return named("Options.URL", explicit)
	}
	if env := os.Getenv(EnvURL); env != "" {
		return named(EnvURL, env)
	}
	if _, err := os.Stat(DefaultSocket); err == nil {
		return sidecarAt{base: "http://sidecar", socket: DefaultSocket}, nil
	}
	return sidecarAt{base: DefaultURL}, nil
}

// CheckURL says whether raw names a sidecar as Options.URL and TOOLGATE_URL
// take it. Its error names no setting, so that a program can name its own
// (a command line flag, say): "--url " + err.Error().
func CheckURL(raw string) error {
	_, err := parseURL(raw)
	return err
}

// named reads raw, naming the setting it came from in the error.
func named(setting, raw string) (sidecarAt, error) {
	at, err := parseURL(raw)
	if err != nil {
		return sidecarAt{}, fmt.Errorf("toolgate: %s %w", setting, err)
	}
	return at, nil
}

// parseURL reads unix:///path (or unix:/path, as the sidecar's --listen
// takes it: endpoint.ParseUnix) or http(s)://host:port[/prefix]. Its
// errors start with the quoted value, for the caller to name the setting.
func parseURL(raw string) (sidecarAt, error) {
	if path, isUnix, err := endpoint.ParseUnix(raw); isUnix {
		return unixEndpoint(raw, path, err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return sidecarAt{}, fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return sidecarAt{}, fmt.Errorf("%q: want unix:///path/to.sock or http://host:port", raw)
	}
	if u.Host == "" {
		return sidecarAt{}, fmt.Errorf("%q has no host: want http://host:port", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return sidecarAt{}, fmt.Errorf("%q: a sidecar URL has no user, query or fragment", raw)
	}
	return sidecarAt{base: strings.TrimSuffix(u.Scheme+"://"+u.Host+u.EscapedPath(), "/")}, nil
}

// unixEndpoint dials the socket at path, which must be absolute: a client
// does not depend on its working directory.
func unixEndpoint(raw, path string, err error) (sidecarAt, error) {
	if err != nil || !strings.HasPrefix(path, "/") {
		return sidecarAt{}, fmt.Errorf("%q: a socket path must be absolute, as in %s", raw, endpoint.UnixURL(DefaultSocket))
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
