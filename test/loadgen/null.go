package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// The null server is the ceiling of a machine for make compare-opa-server:
// an HTTP/1.1 responder over raw net that reads a request (framing only:
// the head up to its empty line, then Content-Length bytes) and writes a
// fixed answer. Driven by the same load generator as the sidecar and OPA,
// in the same run, it shows what the loopback, the kernel, the scheduler
// and the load generator cost on their own: no server can answer faster
// here, so a ratio to OPA that its own figure does not reach cannot be
// reached by the sidecar either.

// nullAnswer is the sidecar's answer to the reference request, trimmed to
// the fields a decision needs, so the bytes written are of the same order.
const nullAnswer = `{"decision":"deny","effect":"deny","matchedRuleId":"r500","code":"r500","reason":"null server: nothing was decided"}` + "\n"

var nullResponse = []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(nullAnswer), nullAnswer))

// maxNullHead bounds a request's head (the sidecar's own limit is 16 KiB).
const maxNullHead = 16 << 10

// maxNullBody bounds a request's body: the null server reads and discards it.
const maxNullBody = 1 << 20

// errNullRequest is a request the null server cannot frame.
var errNullRequest = errors.New("malformed request")

// serveNull answers every request on ln with nullResponse until ctx ends.
func serveNull(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	conns := map[net.Conn]struct{}{}
	var mu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			serveNullConn(c, c)
			_ = c.Close()
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		})
	}
}

// serveNullConn answers requests read from r on w until r ends or a
// request cannot be framed (answered 400, then the connection ends).
func serveNullConn(r io.Reader, w io.Writer) {
	br := bufio.NewReaderSize(r, 4<<10)
	for {
		n, err := readNullRequest(br)
		if err != nil {
			if errors.Is(err, errNullRequest) {
				msg := err.Error() + "\n"
				_, _ = fmt.Fprintf(w, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
			}
			return
		}
		if _, err := br.Discard(n); err != nil {
			return
		}
		if _, err := w.Write(nullResponse); err != nil {
			return
		}
	}
}

// readNullRequest reads a request's head and returns its body's length:
// the Content-Length header's value, 0 without one. A chunked body, a
// repeated or malformed Content-Length, a head past maxNullHead or a body
// past maxNullBody is errNullRequest; a connection that ends is io.EOF or
// io.ErrUnexpectedEOF.
func readNullRequest(br *bufio.Reader) (int, error) {
	length, seen, headBytes := 0, false, 0
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		headBytes += len(line)
		switch {
		case errors.Is(err, bufio.ErrBufferFull) || headBytes > maxNullHead:
			return 0, fmt.Errorf("%w: head longer than %d bytes", errNullRequest, maxNullHead)
		case err == io.EOF && first && len(line) == 0:
			return 0, io.EOF
		case err != nil:
			return 0, io.ErrUnexpectedEOF
		}
		line = bytes.TrimRight(line, "\r\n")
		if first {
			if bytes.Count(line, []byte(" ")) != 2 || !bytes.HasSuffix(line, []byte(" HTTP/1.1")) {
				return 0, fmt.Errorf("%w: request line %q is not METHOD TARGET HTTP/1.1", errNullRequest, line)
			}
			continue
		}
		if len(line) == 0 {
			return length, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, fmt.Errorf("%w: header line %q has no colon", errNullRequest, line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, fmt.Errorf("%w: Transfer-Encoding %q: only Content-Length bodies", errNullRequest, value)
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if seen || err != nil || n < 0 || n > maxNullBody || value[0] == '+' {
				return 0, fmt.Errorf("%w: Content-Length %q (repeated, not a number, or over %d)", errNullRequest, value, maxNullBody)
			}
			length, seen = n, true
		}
	}
}
