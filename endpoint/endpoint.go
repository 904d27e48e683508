// Package endpoint is the sidecar's endpoint contract, shared by everything
// that serves it, injects it or calls it: where it answers by default (a
// Unix socket, else a loopback port), the variable that tells clients where
// it is, and how a Unix socket address is written. It depends on the
// standard library only, so the lightest client can import it. The Helm
// chart repeats the socket path, its length limit and the loopback address
// in values.yaml and values.schema.json; a test here keeps them equal.
package endpoint

import (
	"fmt"
	"strings"
)

const (
	// DefaultSocket is the socket injected sidecars answer on, and where a
	// client looks first when nothing names the sidecar.
	DefaultSocket = "/var/run/toolgate/toolgate.sock"
	// DefaultAddress is the loopback host:port a sidecar answers on when
	// no socket can be used.
	DefaultAddress = "127.0.0.1:8181"
	// DefaultURL is DefaultAddress as a client's URL.
	DefaultURL = "http://" + DefaultAddress
	// EnvURL names the sidecar for every client (injected Pods carry it):
	// unix:///path/to.sock or http://host:port.
	EnvURL = "TOOLGATE_URL"
	// MaxSocketPath is what fits in sockaddr_un's sun_path on Linux (108
	// bytes with the terminating NUL).
	MaxSocketPath = 107
)

const (
	// unixScheme starts every Unix socket address: unix:/abs/path,
	// unix:rel/path, or the URL form unix:///abs/path.
	unixScheme = "unix:"
	// unixURL starts the URL form, which TOOLGATE_URL and probes carry.
	unixURL = unixScheme + "//"
)

// UnixURL is the socket at path in the URL form, unix:///abs/path: what
// TOOLGATE_URL and the injected sidecar's probes and --listen carry.
func UnixURL(path string) string { return unixURL + path }

// ParseUnix reads a Unix socket address: unix:/abs/path, unix:rel/path, or
// the URL form unix:///abs/path. isUnix is false for anything else
// (host:port, http://...), which it leaves to the caller. The URL form
// must name no host (unix://host/x is refused), and the address must name
// a path. It does not check what a socket address holds: SocketPath does.
func ParseUnix(addr string) (path string, isUnix bool, err error) {
	rest, isUnix := strings.CutPrefix(addr, unixScheme)
	if !isUnix {
		return "", false, nil
	}
	if after, isURL := strings.CutPrefix(rest, "//"); isURL {
		if !strings.HasPrefix(after, "/") {
			return "", true, fmt.Errorf("%q names a host; a socket URL is unix:///absolute/path", addr)
		}
		rest = after
	}
	if rest == "" {
		return "", true, fmt.Errorf("%q names no socket path", addr)
	}
	return rest, true, nil
}

// SocketPath is ParseUnix for an address to listen on: the path must also
// fit in a Unix socket address (MaxSocketPath) and hold no NUL byte.
func SocketPath(addr string) (path string, isUnix bool, err error) {
	path, isUnix, err = ParseUnix(addr)
	if !isUnix || err != nil {
		return "", isUnix, err
	}
	switch {
	case len(path) > MaxSocketPath:
		return "", true, fmt.Errorf("%q: the socket path is %d bytes, more than the %d a Unix socket address holds", addr, len(path), MaxSocketPath)
	case strings.ContainsRune(path, 0):
		return "", true, fmt.Errorf("%q: the socket path holds a NUL byte", addr)
	}
	return path, true, nil
}
