package httploop

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/toolgate/toolgate/endpoint"
)

// SocketMode lets any user connect: who may talk to the sidecar is not the
// question (anyone in the Pod may ask for a decision); who may replace the
// socket is, and that is decided by its directory, which only the sidecar
// can write (an emptyDir the agent's containers mount read-only).
const SocketMode = 0o666

// Listen opens host:port, or a Unix socket for unix:/path.
func Listen(addr string) (net.Listener, error) {
	path, isUnix, err := endpoint.SocketPath(addr)
	if err != nil {
		return nil, err
	}
	if !isUnix {
		return net.Listen("tcp", addr)
	}
	return listenUnix(path)
}

// listenUnix removes a socket file left by a previous process (only a
// socket, and only one nobody answers on), creates the directory 0755 when
// it is missing, and makes the socket SocketMode.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("%s is in use: another process answers on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("making %s connectable: %w", path, err)
	}
	return ln, nil
}

// Squattable is a TCP address another process holds. When a Unix socket is
// also served, the sidecar keeps serving it and retries the port rather
// than exit: exiting would hand the squatter the socket's clients too.
func Squattable(addr string, err error) bool {
	_, isUnix, _ := endpoint.SocketPath(addr)
	return !isUnix && errors.Is(err, syscall.EADDRINUSE)
}

// CheckAddr checks an address to Listen on: host:port (an IP address or a
// host name, a port number) or unix:/path.
func CheckAddr(addr string) error {
	if _, isUnix, err := endpoint.SocketPath(addr); isUnix {
		return err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port or unix:/path: %v", addr, err)
	}
	if host != "" && net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(host)) > 0 {
		return fmt.Errorf("%q: host %q is neither an IP address nor a host name", addr, host)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}
