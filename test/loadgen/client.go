package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"time"
)

// conn is one keep-alive HTTP/1.1 connection that replays a prebuilt
// request. It is deliberately minimal (no net/http client) so that, on a
// shared 2-core machine, the generator spends as little CPU as possible and
// the figures describe the sidecar rather than the client.
type conn struct {
	dial func() (net.Conn, error)
	c    net.Conn
	br   *bufio.Reader
	req  []byte
	body []byte // the last response body, reused
}

func (c *conn) close() {
	if c.c != nil {
		_ = c.c.Close()
		c.c = nil
	}
}

// do sends the request and reads the whole response.
func (c *conn) do(deadline time.Time) (status int, body []byte, err error) {
	if c.c == nil {
		nc, err := c.dial()
		if err != nil {
			return 0, nil, err
		}
		c.c = nc
		if c.br == nil {
			c.br = bufio.NewReaderSize(nc, 16<<10)
		} else {
			c.br.Reset(nc)
		}
	}
	_ = c.c.SetDeadline(deadline)
	if _, err := c.c.Write(c.req); err != nil {
		c.close()
		return 0, nil, err
	}
	status, keepAlive, body, err := readResponse(c.br, c.body[:0])
	c.body = body
	if err != nil || !keepAlive {
		c.close()
	}
	return status, body, err
}

var errMalformed = errors.New("malformed HTTP response")

// readResponse parses one HTTP/1.1 response: status line, headers, and a
// body framed by Content-Length or chunked encoding.
func readResponse(br *bufio.Reader, body []byte) (status int, keepAlive bool, _ []byte, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, body, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, body, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil || status < 100 {
		return 0, false, body, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	keepAlive = line[7] == '1'
	length, chunked := -1, false
	for {
		h, err := br.ReadSlice('\n')
		if err != nil {
			return status, false, body, fmt.Errorf("%w: headers: %v", errMalformed, err)
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return status, false, body, fmt.Errorf("%w: header %q", errMalformed, h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 {
				return status, false, body, fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
			if !chunked {
				return status, false, body, fmt.Errorf("%w: unsupported Transfer-Encoding %q", errMalformed, value)
			}
		case bytes.EqualFold(name, []byte("Connection")):
			keepAlive = !bytes.EqualFold(value, []byte("close"))
		}
	}
	switch {
	case chunked:
		body, err = readChunked(br, body)
	case length >= 0:
		body, err = readN(br, body, length)
	default:
		return status, false, body, fmt.Errorf("%w: no Content-Length and not chunked", errMalformed)
	}
	return status, keepAlive, body, err
}

func readN(br *bufio.Reader, body []byte, n int) ([]byte, error) {
	start := len(body)
	body = slices.Grow(body, n)[:start+n]
	if _, err := io.ReadFull(br, body[start:]); err != nil {
		return body[:start], fmt.Errorf("%w: body: %v", errMalformed, err)
	}
	return body, nil
}

func readChunked(br *bufio.Reader, body []byte) ([]byte, error) {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return body, fmt.Errorf("%w: chunk size: %v", errMalformed, err)
		}
		sizeField, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		size, err := strconv.ParseUint(string(sizeField), 16, 31)
		if err != nil {
			return body, fmt.Errorf("%w: chunk size %q", errMalformed, line)
		}
		if size == 0 {
			for { // trailers until the empty line
				t, err := br.ReadSlice('\n')
				if err != nil {
					return body, fmt.Errorf("%w: trailer: %v", errMalformed, err)
				}
				if len(bytes.TrimRight(t, "\r\n")) == 0 {
					return body, nil
				}
			}
		}
		if body, err = readN(br, body, int(size)); err != nil {
			return body, err
		}
		cr, err1 := br.ReadByte()
		lf, err2 := br.ReadByte()
		if err1 != nil || err2 != nil || cr != '\r' || lf != '\n' {
			return body, fmt.Errorf("%w: chunk not followed by CRLF", errMalformed)
		}
	}
}

// buildRequest is the request every connection replays.
func buildRequest(host, path string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, host, len(body))
	b.Write(body)
	return b.Bytes()
}
