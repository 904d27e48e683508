//go:build linux

package httploop

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// tcpPair is a connected pair of real loopback TCP connections.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}

// The raw reads and writes behave as the net.Conn's own: data both ways,
// a write larger than the socket buffers waits for the reader (EAGAIN)
// and completes, EOF after the peer's half-close, deadlines and Close
// give the errors net/http and the MCP loop test for.
func TestSocketIOBehavesAsTheConn(t *testing.T) {
	t.Run("both ways, and a write bigger than the buffers", func(t *testing.T) {
		a, b := tcpPair(t)
		ra, rb := newSocketIO(a), newSocketIO(b)
		if _, ok := ra.(*socketIO); !ok {
			t.Fatalf("a TCP connection got %T, not the raw path", ra)
		}
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
		got := make(chan []byte, 1)
		go func() {
			time.Sleep(50 * time.Millisecond) // the writer meets a full buffer first
			buf, _ := io.ReadAll(io.LimitReader(rb, int64(len(big))))
			got <- buf
		}()
		n, err := ra.Write(big)
		if err != nil || n != len(big) {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(big))
		}
		if b := <-got; !bytes.Equal(b, big) {
			t.Fatalf("read %d bytes, not what was written", len(b))
		}
		if _, err := rb.Write([]byte("pong")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		if n, err := ra.Read(buf); err != nil || string(buf[:n]) != "pong" {
			t.Fatalf("Read = %q, %v", buf[:n], err)
		}
		if n, err := ra.Read(nil); n != 0 || err != nil {
			t.Fatalf("an empty Read = %d, %v; want 0, nil", n, err)
		}
	})
	t.Run("EOF after the peer's half-close", func(t *testing.T) {
		a, b := tcpPair(t)
		if _, err := b.Write([]byte("last")); err != nil {
			t.Fatal(err)
		}
		if err := b.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(newSocketIO(a))
		if err != nil || string(got) != "last" {
			t.Fatalf("ReadAll = %q, %v; want \"last\", nil (EOF ends it)", got, err)
		}
	})
	t.Run("a read deadline is a timeout", func(t *testing.T) {
		a, _ := tcpPair(t)
		if err := a.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		_, err := newSocketIO(a).Read(make([]byte, 8))
		if !isTimeout(err) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read past the deadline = %v; want a timeout", err)
		}
	})
	t.Run("Close wakes a waiting read with net.ErrClosed", func(t *testing.T) {
		a, _ := tcpPair(t)
		rw := newSocketIO(a)
		done := make(chan error, 1)
		go func() { _, err := rw.Read(make([]byte, 8)); done <- err }()
		time.Sleep(20 * time.Millisecond)
		_ = a.Close()
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Read on a closed connection = %v; want net.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not wake the read")
		}
	})
	t.Run("a write to a reset connection fails with its errno", func(t *testing.T) {
		a, b := tcpPair(t)
		_ = b.(*net.TCPConn).SetLinger(0)
		_ = b.Close() // a reset, not a FIN
		rw := newSocketIO(a)
		var err error
		for range 100 {
			if _, err = rw.Write([]byte("x")); err != nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("Write after a reset = %v; want ECONNRESET or EPIPE", err)
		}
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "write" || op.Net != "tcp" {
			t.Fatalf("the error is %#v; want a *net.OpError for a tcp write", err)
		}
	})
	t.Run("a Unix socket takes the raw path too", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s")
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ln.Close() }()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				_, _ = c.Write([]byte("hi"))
				_ = c.Close()
			}
		}()
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		rw := newSocketIO(c)
		if _, ok := rw.(*socketIO); !ok {
			t.Fatalf("a Unix connection got %T, not the raw path", rw)
		}
		if got, err := io.ReadAll(rw); err != nil || string(got) != "hi" {
			t.Fatalf("ReadAll = %q, %v", got, err)
		}
	})
	t.Run("a connection without a socket is used as it is", func(t *testing.T) {
		a, b := net.Pipe()
		defer func() { _ = a.Close(); _ = b.Close() }()
		if rw := newSocketIO(a); rw != io.ReadWriter(a) {
			t.Fatalf("net.Pipe got %T; want the conn itself", rw)
		}
	})
}

// peerOpen reuses an idle upstream connection only when the upstream has
// neither closed it nor sent anything unasked.
func TestPeerOpen(t *testing.T) {
	a, _ := tcpPair(t)
	if !peerOpen(a) {
		t.Fatal("an idle, open connection was judged closed")
	}
	c, d := tcpPair(t)
	_ = d.Close()
	// The FIN crosses loopback on its own time: wait for it, not a while.
	testenv.Eventually(t, "a connection its peer closed is judged closed", func() (bool, string) { return !peerOpen(c), "still judged open" })
	e, f := tcpPair(t)
	if _, err := f.Write([]byte("HTTP/1.1 408 Request Timeout\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a connection with unasked bytes waiting is judged closed", func() (bool, string) { return !peerOpen(e), "still judged open" })
	buf := make([]byte, 8)
	if n, err := e.Read(buf); err != nil || string(buf[:n]) != "HTTP/1.1" {
		t.Fatalf("the peek consumed what it looked at: Read = %q, %v", buf[:n], err)
	}
	_ = a.Close()
	if peerOpen(a) {
		t.Fatal("a connection closed on this side was judged open")
	}
}
