//go:build linux

package httploop

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// socketIO reads and writes a connection's socket with raw system calls,
// for the MCP proxy's per-call path (both sides of every tools/call).
//
// Why: Go's sockets are non-blocking, so read(2) and write(2) on them
// return at once (EAGAIN when they would block, and the poller waits).
// Yet each goes through the runtime's blocking-syscall path, which wakes
// the runtime's monitor thread (sysmon) whenever it sleeps; once awake it
// polls every 20 µs until the process is idle again. A proxy sleeps
// between every request and answer, so that is two wake-ups per call, each
// a burst of context switches. On the 2-core VM where the proxy is
// measured, where a context switch costs tens of µs, raw calls took a
// tools/call from 16.8 to 9.9 context switches in the proxy and its CPU
// from 542 to 422 µs (make measure-mcp). Waiting still goes through the
// runtime's poller (syscall.RawConn), so deadlines and Close work as on
// the net.Conn.
type socketIO struct {
	rc  syscall.RawConn
	net string
	// The functions given to rc and what they work on, made once per
	// connection rather than a closure per call (two allocations a
	// request). A read and a write may run at once (the close watch
	// reads while a stream is written), never two of either.
	rd, wr     func(fd uintptr) bool
	rp, wp     []byte
	rn, wdone  int
	rerr, werr syscall.Errno
}

// newSocketIO is c's socket as an io.ReadWriter; c itself when it has no
// socket of its own (a pipe in tests).
func newSocketIO(c net.Conn) io.ReadWriter {
	if tc, ok := c.(*Conn); ok {
		c = tc.Conn
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	s := &socketIO{rc: rc, net: c.LocalAddr().Network()}
	s.rd, s.wr = s.read, s.write
	return s
}

func (s *socketIO) read(fd uintptr) bool {
	p := s.rp
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // the poller waits for the socket
		}
		s.rn, s.rerr = int(r), e
		return true
	}
}

func (s *socketIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rp, s.rn, s.rerr = p, 0, 0
	err := s.rc.Read(s.rd)
	s.rp = nil
	n, errno := s.rn, s.rerr
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: s.net, Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (s *socketIO) write(fd uintptr) bool {
	p := s.wp
	for s.wdone < len(p) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[s.wdone])), uintptr(len(p)-s.wdone))
		switch e {
		case 0:
			s.wdone += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // the send buffer is full: the poller waits
		default:
			s.werr = e
			return true
		}
	}
	return true
}

func (s *socketIO) Write(p []byte) (int, error) {
	s.wp, s.wdone, s.werr = p, 0, 0
	err := s.rc.Write(s.wr)
	s.wp = nil
	done, errno := s.wdone, s.werr
	switch {
	case err != nil:
		return done, err
	case errno != 0:
		return done, &net.OpError{Op: "write", Net: s.net, Err: errno}
	}
	return done, nil
}

// peekOpen tells whether the socket has neither been closed by its peer
// nor received anything: one non-blocking MSG_PEEK, raw for the reason
// socketIO is. Used on pooled upstream connections (peerOpen).
func peekOpen(rc syscall.RawConn) bool {
	open := false
	var b [1]byte
	err := rc.Read(func(fd uintptr) bool {
		_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		open = e == syscall.EAGAIN
		return true
	})
	return err == nil && open
}
