package httploop

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve runs a Server with h on a loopback port until the test ends.
func serve(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Log = slog.New(slog.DiscardHandler)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ln.Addr().String()
}

// send serves srv and writes raw to it on a new connection, closed when
// the test ends; it returns the connection and when raw was sent.
func send(t *testing.T, srv *Server, raw string) (net.Conn, time.Time) {
	t.Helper()
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	start := time.Now()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c, start
}

// A client that sends its request and never reads the answer cannot hold
// the handler past WriteTimeout, as with net/http's WriteTimeout.
func TestWriteTimeoutCutsAClientThatDoesNotRead(t *testing.T) {
	wrote := make(chan error, 1)
	srv := &Server{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: 300 * time.Millisecond, IdleTimeout: time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chunk := []byte(strings.Repeat("x", 64<<10))
			var err error
			for i := 0; i < 4096 && err == nil; i++ { // 256 MiB: far past any socket buffer
				_, err = w.Write(chunk)
				if err == nil {
					err = http.NewResponseController(w).Flush()
				}
			}
			wrote <- err
		})}
	_, start := send(t, srv, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("256 MiB written to a client that reads nothing")
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("the write failed after %v; the write timeout is %v", took, srv.WriteTimeout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler is still writing 10s after a write timeout of 300ms")
	}
}

// A body sent slower than ReadTimeout allows fails to read; the handler
// still answers (here a 400, as the sidecar's does).
func TestReadTimeoutCutsASlowBody(t *testing.T) {
	srv := &Server{ReadHeaderTimeout: time.Second, ReadTimeout: 400 * time.Millisecond, WriteTimeout: time.Second, IdleTimeout: time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				w.Header().Set("Connection", "close")
				http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
				return
			}
			_, _ = io.WriteString(w, "read")
		})}
	c, start := send(t, srv, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "timeout") {
		t.Fatalf("got %d %q, want 400 naming the timeout", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("answered after %v; the read timeout is %v", took, srv.ReadTimeout)
	}
}

// A handler may move its write deadline past WriteTimeout (the sidecar
// does, for a call held for an approval), through http.ResponseController.
func TestAHandlerMayExtendItsWriteDeadline(t *testing.T) {
	srv := &Server{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: 200 * time.Millisecond, IdleTimeout: time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(5 * time.Second))
			time.Sleep(600 * time.Millisecond) // what is measured: an answer held past WriteTimeout
			_, _ = io.WriteString(w, "held")
		})}
	addr := serve(t, srv)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "held" {
		t.Fatalf("got %q, %v", body, err)
	}
}
