//go:build !linux

package httploop

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// newSocketIO is c itself: the raw path is Linux's (socket_io_linux.go).
func newSocketIO(c net.Conn) io.ReadWriter { return c }

// peekOpen tells whether the socket has neither been closed by its peer
// nor received anything: one non-blocking MSG_PEEK.
func peekOpen(rc syscall.RawConn) bool {
	open := false
	var b [1]byte
	err := rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n < 0 && (errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK))
		return true
	})
	return err == nil && open
}
