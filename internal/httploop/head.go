package httploop

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
)

// readPlainHead reads a request whose head is plain and already buffered
// in br, without net/http's parser, and nil for any other, of which it
// consumes nothing: http.ReadRequest reads that one, so every refusal,
// every error message and every unusual framing stays net/http's.
//
// Plain is a strict subset of what http.ReadRequest accepts, read to the
// same request (FuzzPlainHeadMatchesReadRequest compares the two): an
// HTTP/1.1 request line with an upper-case method and an origin-form
// target of unreserved characters; CRLF line ends; header names of
// letters, digits and '-', values of visible ASCII, space and tab; at most
// maxPlainHeaders headers; one Host; at most one Content-Length, of 1 to
// 18 digits; Connection only close or keep-alive. Transfer-Encoding,
// Expect, Trailer, Upgrade and Pragma (which net/http rewrites) make a
// head not plain. So a request that could be framed two ways never is
// read here.
//
// Why: net/http's parser is a third of a decision's CPU on a 2-core
// machine (maps of canonicalised keys, a string per line, URL parsing);
// this one allocates one string for the head and one array of header
// values; the request, its URL, header map and body are the connection's
// (st), reused (the loop copies the request, WithContext, before a
// handler sees it).
func readPlainHead(br *bufio.Reader, st *plainStore) *http.Request {
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		return nil
	}
	head := buf[:end+2] // each line with its CRLF
	nl := bytes.Index(head, crlf)
	method, target, ok := plainRequestLine(head[:nl])
	if !ok {
		return nil
	}
	h, ok := plainHeaders(head[nl+2:])
	if !ok {
		return nil
	}
	// One string holds the head; the request's strings are slices of it.
	s := string(head)
	if st.header == nil {
		st.header = make(http.Header, 8)
	}
	clear(st.header)
	r := &st.req
	*r = http.Request{
		Method: internMethod(s[:method]), RequestURI: s[method+1 : method+1+target],
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: st.header, ContentLength: h.length,
	}
	path, query, _ := cutByte(r.RequestURI, '?')
	st.url = url.URL{Path: path, RawQuery: query}
	r.URL = &st.url
	lines := s[nl+2:]
	// One array for the usual one value each, Host's excepted (plainHeaders
	// saw exactly one Host line, kept as r.Host).
	values := make([]string, 0, h.n-1)
	for range h.n {
		line, rest, _ := cutByte(lines, '\n')
		lines = rest
		name, value, _ := cutByte(line[:len(line)-1], ':')
		key := canonicalKey(name)
		if key == "Host" {
			// net/http keeps the Host header only as the request's Host
			// (plainHeaders saw exactly one): never put in the map.
			r.Host = textproto.TrimString(value)
			continue
		}
		if vs := r.Header[key]; vs != nil {
			r.Header[key] = append(vs, textproto.TrimString(value))
			continue
		}
		values = append(values, textproto.TrimString(value))
		r.Header[key] = values[len(values)-1 : len(values) : len(values)]
	}
	r.Close = h.close
	r.Body = http.NoBody
	if h.length > 0 {
		st.body = plainBody{r: br, n: h.length}
		r.Body = &st.body
	} else {
		r.ContentLength = 0
	}
	_, _ = br.Discard(end + 4)
	return r
}

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
	http11   = []byte(" HTTP/1.1")
)

// maxPlainHeaders bounds the headers of a plain head: a decision request
// carries a handful.
const maxPlainHeaders = 32

// plainRequestLine checks "METHOD TARGET HTTP/1.1" and returns the
// method's and the target's lengths.
func plainRequestLine(line []byte) (method, target int, ok bool) {
	rest, isHTTP11 := bytes.CutSuffix(line, http11)
	if !isHTTP11 {
		return 0, 0, false
	}
	m, t, found := bytes.Cut(rest, []byte(" "))
	if !found || len(m) == 0 || len(m) > 16 || len(t) == 0 || t[0] != '/' {
		return 0, 0, false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return 0, 0, false
		}
	}
	inQuery := false
	for _, c := range t {
		switch {
		case unreserved(c) || c == '/':
		case c == '?' && !inQuery:
			inQuery = true
		case inQuery && (c == '=' || c == '&' || c == '%' || c == '+' || c == ','):
		default:
			return 0, 0, false
		}
	}
	return len(m), len(t), true
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// plainHead is what plainHeaders found.
type plainHead struct {
	n      int   // header lines
	length int64 // Content-Length, 0 without one
	close  bool  // Connection: close
}

// plainHeaders checks the header lines (each ending in CRLF) of a plain
// head.
func plainHeaders(lines []byte) (h plainHead, ok bool) {
	hosts, lengths := 0, 0
	for len(lines) > 0 {
		nl := bytes.IndexByte(lines, '\n')
		if nl < 1 || lines[nl-1] != '\r' || h.n == maxPlainHeaders {
			return h, false
		}
		line := lines[:nl-1]
		lines = lines[nl+1:]
		h.n++
		colon := bytes.IndexByte(line, ':')
		if colon < 1 {
			return h, false
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		for _, c := range name {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return h, false
			}
		}
		for _, c := range value {
			if (c < ' ' && c != '\t') || c > '~' {
				return h, false
			}
		}
		switch {
		case asciiEqualFold(name, "Host"):
			hosts++
		case asciiEqualFold(name, "Content-Length"):
			lengths++
			if len(value) == 0 || len(value) > 18 {
				return h, false
			}
			h.length = 0
			for _, c := range value {
				if c < '0' || c > '9' {
					return h, false
				}
				h.length = h.length*10 + int64(c-'0')
			}
		case asciiEqualFold(name, "Connection"):
			switch {
			case asciiEqualFold(value, "close"):
				h.close = true
			case asciiEqualFold(value, "keep-alive"):
			default:
				return h, false
			}
		case asciiEqualFold(name, "Transfer-Encoding"), asciiEqualFold(name, "Expect"),
			asciiEqualFold(name, "Trailer"), asciiEqualFold(name, "Upgrade"), asciiEqualFold(name, "Pragma"):
			return h, false
		}
	}
	return h, hosts == 1 && lengths <= 1
}

func asciiEqualFold[T ~string | ~[]byte](b T, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

func cutByte(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// commonKeys are the canonical forms of the headers a decision request
// carries, so that they cost no allocation.
var commonKeys = []string{"Host", "Content-Length", "Content-Type", "Connection", "User-Agent",
	"Accept", "Accept-Encoding", "Traceparent", "Tracestate", "Authorization"}

func canonicalKey(name string) string {
	for _, k := range commonKeys {
		if name == k { // as most clients spell them: no folding
			return k
		}
	}
	for _, k := range commonKeys {
		if len(k) == len(name) && asciiEqualFold(name, k) {
			return k
		}
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

func internMethod(m string) string {
	switch m {
	case http.MethodPost:
		return http.MethodPost
	case http.MethodGet:
		return http.MethodGet
	case http.MethodHead:
		return http.MethodHead
	}
	return m
}

// plainStore is what readPlainHead reuses from one request of a
// connection to the next.
type plainStore struct {
	req    http.Request
	url    url.URL
	header http.Header
	body   plainBody
}

// plainBody is a plain head's body: n bytes of the connection, as
// net/http's is (io.ErrUnexpectedEOF when the connection ends first).
type plainBody struct {
	r *bufio.Reader
	n int64
}

func (b *plainBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	switch {
	case b.n == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *plainBody) Close() error { return nil }
