package sidecar

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// socketMode lets any user connect: who may talk to the sidecar is not the
// question (anyone in the Pod may ask for a decision); who may replace the
// socket is, and that is decided by its directory, which only the sidecar
// can write (an emptyDir the agent's containers mount read-only).
const socketMode = 0o666

// listen opens host:port, or a Unix socket for unix:/path.
func listen(addr string) (net.Listener, error) {
	path, isUnix, err := socketPath(addr)
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
// it is missing, and makes the socket socketMode.
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
	if err := os.Chmod(path, socketMode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("making %s connectable: %w", path, err)
	}
	return ln, nil
}

// squattable is a TCP address another process holds. When a Unix socket is
// also served, the sidecar keeps serving it and retries the port rather
// than exit: exiting would hand the squatter the socket's clients too.
func squattable(addr string, err error) bool {
	_, isUnix, _ := socketPath(addr)
	return !isUnix && errors.Is(err, syscall.EADDRINUSE)
}
