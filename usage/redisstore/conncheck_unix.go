//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package redisstore

import (
	"net"
	"syscall"
	"time"
)

// alive tells whether an idle connection is still open, without reading
// from it: a server restarted or gone has closed it (the peek reads end of
// file), and a reply nobody asked for means it is out of step. A
// connection this cannot look into (TLS, whose own records may wait
// unread) counts as alive, as go-redis's pool check does.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	// The last command's deadline has passed by now: without clearing
	// it, the peek would fail on it.
	if c.SetDeadline(time.Time{}) != nil {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	if err := raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n < 0 && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
		return true
	}); err != nil {
		return false
	}
	return open
}
