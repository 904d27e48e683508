package httploop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Forwarder sends a request to a plain-http upstream over a pooled
// HTTP/1.1 connection, in the request's own goroutine, and relays the
// answer as it arrives. http.Transport hands every request to a writer
// goroutine and every response back from a reader goroutine: on this kind
// of machine each hand-off is a wake-up of tens of microseconds, and a
// tools/call crosses four. Here the only waits are on the sockets.
//
// It serves http:// upstreams reached without a proxy; https upstreams (TLS,
// HTTP/2) and those behind HTTP_PROXY go through httputil.ReverseProxy.
type Forwarder struct {
	url    *url.URL
	addr   string // host:port dialled
	dialer net.Dialer

	mu   sync.Mutex
	idle []*upstreamConn // most recently used last
}

// maxIdleUpstreamConns bounds the kept-alive connections to one upstream,
// as the Transport's MaxIdleConnsPerHost did.
const maxIdleUpstreamConns = 128

// upstreamIdleTimeout drops a pooled connection unused this long, as the
// Transport's IdleConnTimeout did.
const upstreamIdleTimeout = 90 * time.Second

type upstreamConn struct {
	net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// DialTimeout bounds connecting to an upstream, so a request to a dead one
// fails quickly rather than hang the agent.
const DialTimeout = 5 * time.Second

// NewForwarder returns nil when u needs what only http.Transport does:
// TLS, HTTP/2 or a proxy from the environment.
func NewForwarder(u *url.URL) *Forwarder {
	if u.Scheme != "http" {
		return nil
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || p != nil {
		return nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &Forwarder{url: u, addr: addr,
		dialer: net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}}
}

// conn returns a live pooled connection or dials one.
func (f *Forwarder) conn(ctx context.Context) (*upstreamConn, error) {
	now := time.Now()
	for {
		f.mu.Lock()
		n := len(f.idle)
		if n == 0 {
			f.mu.Unlock()
			break
		}
		c := f.idle[n-1]
		f.idle = f.idle[:n-1]
		f.mu.Unlock()
		if now.Sub(c.idleSince) < upstreamIdleTimeout && peerOpen(c.Conn) {
			return c, nil
		}
		_ = c.Close()
	}
	c, err := f.dialer.DialContext(ctx, "tcp", f.addr)
	if err != nil {
		return nil, err
	}
	rw := newSocketIO(c)
	return &upstreamConn{Conn: c, br: bufio.NewReaderSize(rw, 16<<10), bw: bufio.NewWriterSize(rw, 16<<10)}, nil
}

// peerOpen tells whether an idle connection can carry a request: the
// upstream has neither closed it (its idle timeout) nor sent anything
// unasked. One non-blocking peek: no goroutine watches idle connections.
func peerOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	return err == nil && peekOpen(raw)
}

func (f *Forwarder) release(c *upstreamConn) {
	c.idleSince = time.Now()
	f.mu.Lock()
	if len(f.idle) < maxIdleUpstreamConns {
		f.idle = append(f.idle, c)
		c = nil
	}
	f.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// Close drops every pooled connection (the sidecar is stopping).
func (f *Forwarder) Close() {
	f.mu.Lock()
	idle := f.idle
	f.idle = nil
	f.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}

// hopHeaders are meaningful for one connection only, never forwarded
// (RFC 9110 7.6.1), as httputil.ReverseProxy drops them.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// WithoutHopHeaders deletes h's hop-by-hop headers, those its Connection
// header names included.
func WithoutHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// Hooks are what the caller does at each step of a forward, as
// httputil.ReverseProxy's Rewrite, ModifyResponse and ErrorHandler are.
type Hooks struct {
	// Header makes the request's headers the upstream's.
	Header func(http.Header)
	// Sent is told that the request was written upstream (ok) or failed
	// to be, before the answer is read.
	Sent func(ctx context.Context, ok bool)
	// Modify may rewrite the answer before it is relayed (replacing its
	// Body); an error fails the forward.
	Modify func(*http.Response) error
	// Fail answers a request the upstream did not answer.
	Fail func(http.ResponseWriter, *http.Request, error)
}

// Forward sends r to the upstream and relays the answer through h.Modify
// to w. It reports an upstream that did not answer through h.Fail, like
// ReverseProxy's ErrorHandler; once the answer has started, a broken
// upstream aborts the agent's response (http.ErrAbortHandler), as
// ReverseProxy does, so a truncated answer is never mistaken for a whole
// one.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, h Hooks) {
	modify, fail := h.Modify, h.Fail
	ctx := r.Context()
	out := r.Clone(ctx)
	h.Header(out.Header)
	u := *f.url
	if r.URL.RawQuery != "" {
		u.RawQuery = r.URL.RawQuery
	}
	out.URL, out.Host = &u, f.url.Host
	out.RequestURI = ""

	c, err := f.conn(ctx)
	if err != nil {
		fail(w, out, err)
		return
	}
	// An agent that hangs up cancels the exchange, as with ReverseProxy.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	reusable := false
	defer func() {
		if stop() && reusable {
			f.release(c)
			return
		}
		_ = c.Close()
	}()
	err = writeRequest(c.bw, out)
	h.Sent(ctx, err == nil)
	if err != nil {
		fail(w, out, err)
		return
	}
	resp, err := readResponse(c.br, out)
	if err != nil {
		fail(w, out, err)
		return
	}
	upstreamBody := resp.Body
	if err := modify(resp); err != nil {
		_ = resp.Body.Close()
		fail(w, out, err)
		return
	}
	WithoutHopHeaders(resp.Header)
	wh := w.Header()
	for k, v := range resp.Header {
		wh[k] = v
	}
	if resp.ContentLength >= 0 {
		wh.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	complete, werr := relayBody(w, resp, resp.Body == upstreamBody, c.br)
	_ = resp.Body.Close()
	if !complete {
		if werr == nil && ctx.Err() == nil {
			panic(http.ErrAbortHandler)
		}
		return
	}
	reusable = !resp.Close && !out.Close
}

// writeRequest writes out as HTTP/1.1 with its body framed by length
// (buffered bodies) or chunked; no header is added but Host and the
// framing (no User-Agent: ReverseProxy adds none either).
func writeRequest(bw *bufio.Writer, out *http.Request) error {
	fmt.Fprintf(bw, "%s %s HTTP/1.1\r\nHost: %s\r\n", out.Method, out.URL.RequestURI(), out.Host)
	if err := out.Header.WriteSubset(bw, map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true}); err != nil {
		return err
	}
	body := out.Body
	switch {
	case body == nil || body == http.NoBody || out.ContentLength == 0:
		if out.Method == http.MethodPost || out.Method == http.MethodPut || out.Method == http.MethodPatch {
			_, _ = bw.WriteString("Content-Length: 0\r\n")
		}
		_, _ = bw.WriteString("\r\n")
	case out.ContentLength > 0:
		fmt.Fprintf(bw, "Content-Length: %d\r\n\r\n", out.ContentLength)
		if _, err := io.CopyN(bw, body, out.ContentLength); err != nil {
			return err
		}
	default:
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		cw := httputil.NewChunkedWriter(bw)
		if _, err := io.Copy(cw, body); err != nil {
			return err
		}
		if err := cw.Close(); err != nil {
			return err
		}
		_, _ = bw.WriteString("\r\n")
	}
	return bw.Flush()
}

// ErrSwitchingProtocols fails an exchange the upstream answered with 101
// Switching Protocols: the proxy upgrades nothing, since what is sent on
// an upgraded connection reaches the upstream unread.
var ErrSwitchingProtocols = errors.New("the upstream answered 101 Switching Protocols; the MCP proxy upgrades no connection")

// readResponse reads the upstream's final answer, passing over any 1xx
// interim one (100 Continue, 103 Early Hints); 101 is refused
// (ErrSwitchingProtocols).
func readResponse(br *bufio.Reader, out *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, out)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			_ = resp.Body.Close()
			return nil, ErrSwitchingProtocols
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			continue
		}
		return resp, nil
	}
}

// relayBody copies the answer to w, flushing whenever the upstream has
// nothing more ready (so an event stream reaches the agent event by event,
// and a whole answer in one write). A body Modify rewrote (direct false)
// hands over whole events: each is flushed. complete is true when the body
// was read to its end.
func relayBody(w http.ResponseWriter, resp *http.Response, direct bool, upstream *bufio.Reader) (complete bool, writeErr error) {
	rc := http.NewResponseController(w)
	buf := relayBuffers.Get().(*[]byte)
	defer relayBuffers.Put(buf)
	for {
		n, err := resp.Body.Read(*buf)
		if n > 0 {
			if _, werr := w.Write((*buf)[:n]); werr != nil {
				return false, werr
			}
			if err != io.EOF && (!direct || upstream.Buffered() == 0) {
				if werr := rc.Flush(); werr != nil {
					return false, werr
				}
			}
		}
		if err == io.EOF {
			// The last bytes go with the end of the answer (finish), in
			// one write.
			return true, nil
		}
		if err != nil {
			return false, nil
		}
	}
}

var relayBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
