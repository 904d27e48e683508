package httploop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Server serves HTTP/1.1 on the MCP proxy's own listener, in place of
// net/http's server, for one reason: latency. net/http starts a goroutine
// per request to watch the connection once the body is read, and ends it
// with a deadline after the response; on this kind of machine those
// wake-ups cost more than the decision. Here a connection is one goroutine
// that reads a request with net/http's own parser (http.ReadRequest: the
// same framing rules, so nothing can be smuggled past it that net/http
// would refuse), runs the proxy's handler and writes the answer.
//
// What it keeps of net/http's server: the header, request, write, idle and
// header-size limits, Expect: 100-continue, keep-alive and Connection:
// close, HTTP/1.0 clients, aborting a response on http.ErrAbortHandler,
// graceful shutdown. It knows nothing of MCP: the handler does. The
// sidecar serves its decision listeners (/v1/evaluate, probes, metrics,
// the MCP paths on the Unix socket) with it too: with the plain heads
// readHead parses, a decision costs half of net/http's CPU (see
// docs/performance.md).
type Server struct {
	Handler           http.Handler
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body, from
	// its first byte, as net/http's does; 0 is none.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing the answer, from the end of the
	// request's headers, as net/http's does; 0 is none.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request; 0 is ReadTimeout.
	IdleTimeout time.Duration
	Log         *slog.Logger

	mu       sync.Mutex
	lns      []net.Listener // one Server may serve several, as net/http's
	conns    map[*serverConn]struct{}
	shutdown bool
	wg       sync.WaitGroup
	sweeping chan struct{} // closed to stop the sweeper
}

// MaxHeaderBytes bounds a request's headers, here and on the sidecar's
// net/http servers: a decision request carries a few hundred bytes of them,
// and net/http's default (1 MiB) times --max-connections would be a lot of
// memory to hand a flood.
const MaxHeaderBytes = 16 << 10

// Timeouts are kept by one sweeper goroutine, not by a socket deadline or
// timer per request: on this kind of machine, arming a timer that is
// earlier than the runtime's next one wakes its network poller thread,
// and a request armed three (idle, headers, body) and a fourth to watch
// for the agent leaving. The sweeper looks every sweepInterval: a phase
// overrunning its limit has its socket deadline set in the past (the
// blocked read fails as a timeout would, and the answer can still be
// written), and a request served longer than closeWatchDelay is watched.
const sweepInterval = 50 * time.Millisecond

// expiredDeadline marks a deadline the sweeper has enforced.
const expiredDeadline = -1

// sweptDeadline is a connection's read or write deadline as the sweeper
// keeps it: in MonoNow nanoseconds (0: none; expiredDeadline: enforced on
// the socket). socket is the connection's SetReadDeadline or
// SetWriteDeadline, called only under the connection's mu.
type sweptDeadline struct {
	at     atomic.Int64
	socket func(time.Time) error
}

// set gives the next reads (or writes) deadline at (0: none). If the
// sweeper cut the last phase short as it ended, that is undone, after it
// is done (it sets the socket's deadline under mu).
func (d *sweptDeadline) set(mu *sync.Mutex, at int64) {
	if d.at.Swap(at) == expiredDeadline {
		mu.Lock()
		_ = d.socket(time.Time{})
		mu.Unlock()
	}
}

// expire enforces on the socket a deadline that has passed at now: the
// blocked read or write fails as a timeout would.
func (d *sweptDeadline) expire(mu *sync.Mutex, now int64) {
	if at := d.at.Load(); at > 0 && now > at {
		mu.Lock()
		if d.at.CompareAndSwap(at, expiredDeadline) {
			_ = d.socket(time.Unix(1, 0))
		}
		mu.Unlock()
	}
}

type serverConn struct {
	c  net.Conn
	tc *Conn // nil when the listener has no limiter
	br *bufio.Reader
	bw *bufio.Writer
	lr *io.LimitedReader // bounds the bytes a request's headers may take

	// readDeadline and writeDeadline are when the current read and write
	// must be done, kept by the sweeper.
	readDeadline, writeDeadline sweptDeadline
	// serving is when the current request started being served (0:
	// none); watch is its close watch, set under mu.
	serving atomic.Int64

	mu     sync.Mutex
	idle   bool   // between two requests: shutdown may close it
	cancel func() // the request being served, cancelled when shutdown closes it
	watch  *closeWatch
	// remote and ctx (the connection's, for WithConn) are made once.
	remote string
	ctx    context.Context
	// These are the current request's, reused by the next one.
	plain      plainStore
	resp       response
	body       eofBody
	closeWatch closeWatch

	// linger: the last request's body was not read to its end; the
	// connection is half-closed and read out before it is closed, so the
	// agent reads the answer rather than a reset (as net/http does).
	linger bool
}

// lingerTimeout bounds reading out an agent's unread body before closing.
const lingerTimeout = 500 * time.Millisecond

// Serve accepts connections on ln until Shutdown.
func (m *Server) Serve(ln net.Listener) error {
	m.mu.Lock()
	if m.shutdown {
		m.mu.Unlock()
		return http.ErrServerClosed
	}
	m.lns = append(m.lns, ln)
	if m.conns == nil {
		m.conns = map[*serverConn]struct{}{}
	}
	if m.sweeping == nil {
		m.sweeping = make(chan struct{})
		go m.sweep(m.sweeping)
	}
	m.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			m.mu.Lock()
			closed := m.shutdown
			m.mu.Unlock()
			if closed {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		sc := &serverConn{c: c, idle: true}
		sc.readDeadline.socket, sc.writeDeadline.socket = c.SetReadDeadline, c.SetWriteDeadline
		sc.tc, _ = c.(*Conn)
		rw := newSocketIO(c)
		sc.lr = &io.LimitedReader{R: rw}
		sc.br = bufio.NewReaderSize(sc.lr, 4<<10)
		sc.bw = bufio.NewWriterSize(rw, 4<<10)
		m.mu.Lock()
		if m.shutdown {
			m.mu.Unlock()
			_ = c.Close()
			return http.ErrServerClosed
		}
		m.conns[sc] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.serveConn(sc)
	}
}

// Shutdown stops accepting, closes idle connections, waits for the
// others to finish their request (a stream: until ctx ends) and then
// closes what is left.
func (m *Server) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.shutdown = true
	var errs []error
	for _, ln := range m.lns {
		if err := ln.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	sweeping := m.sweeping
	m.sweeping = nil
	m.mu.Unlock()
	// The sweeper keeps going until every connection is done: it is what
	// notices agents that have left their streams.
	if sweeping != nil {
		defer close(sweeping)
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		m.closeConns(true)
		select {
		case <-done:
			return err
		case <-ctx.Done():
			m.closeConns(false)
			<-done
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (m *Server) closeConns(idleOnly bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for sc := range m.conns {
		sc.mu.Lock()
		if !idleOnly || sc.idle {
			_ = sc.c.Close()
			if sc.cancel != nil {
				sc.cancel()
			}
		}
		sc.mu.Unlock()
	}
}

// sweep enforces read deadlines and starts close watches until stop.
func (m *Server) sweep(stop <-chan struct{}) {
	tick := time.NewTicker(sweepInterval)
	defer tick.Stop()
	var conns []*serverConn
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		m.mu.Lock()
		conns = conns[:0]
		for sc := range m.conns {
			conns = append(conns, sc)
		}
		m.mu.Unlock()
		now := MonoNow()
		watchAfter := int64(closeWatchDelay)
		if m.closing() {
			watchAfter = 0 // stopping: every stream whose agent left ends now
		}
		for _, sc := range conns {
			sc.readDeadline.expire(&sc.mu, now)
			sc.writeDeadline.expire(&sc.mu, now)
			if t := sc.serving.Load(); t > 0 && now-t >= watchAfter {
				sc.mu.Lock()
				if w := sc.watch; w != nil {
					w.fire()
				}
				sc.mu.Unlock()
			}
		}
	}
}

// monoOf is t in MonoNow nanoseconds; 0 (none) for the zero time.
func monoOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(MonoNow()+int64(time.Until(t)), 1)
}

// after is the MonoNow deadline d after from; 0 (none) when d is.
func after(from int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return from + int64(d)
}

// setReadDeadline and setWriteDeadline give the connection's next reads
// or writes deadline d (MonoNow nanoseconds, 0: none), kept by the sweeper.
func (sc *serverConn) setReadDeadline(d int64)  { sc.readDeadline.set(&sc.mu, d) }
func (sc *serverConn) setWriteDeadline(d int64) { sc.writeDeadline.set(&sc.mu, d) }

func (m *Server) closing() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shutdown
}

// maxDrainBytes is what is read of a request body the handler left
// unread to keep the connection; past it, the connection is closed.
const maxDrainBytes = 256 << 10

func (m *Server) serveConn(sc *serverConn) {
	defer func() {
		if sc.linger {
			if cw, ok := sc.c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				_ = sc.c.SetReadDeadline(time.Now().Add(lingerTimeout))
				_, _ = io.Copy(io.Discard, sc.c)
			}
		}
		_ = sc.c.Close()
		m.mu.Lock()
		delete(m.conns, sc)
		m.mu.Unlock()
		m.wg.Done()
	}()
	idle := m.IdleTimeout
	if idle <= 0 {
		idle = m.ReadTimeout // as net/http
	}
	headers := m.ReadHeaderTimeout
	if headers <= 0 {
		headers = m.ReadTimeout
	}
	for served := false; ; served = true {
		if m.closing() {
			return
		}
		// Between requests: kept alive, evicted last at the cap. Before
		// the first one, the connection is as new as the limiter made it:
		// silent since it connected, evicted first.
		// One clock read serves both (each is a system call's worth of
		// time on a virtual machine, several a request).
		now := MonoNow()
		if sc.tc != nil && served {
			sc.tc.keptAlive.Store(true)
			sc.tc.waitingSince.Store(now)
		}
		sc.lr.N = MaxHeaderBytes + 4096 // net/http's allowance too
		sc.setReadDeadline(after(now, idle))
		if _, err := sc.br.Peek(1); err != nil {
			return
		}
		arrived := MonoNow()
		sc.mu.Lock()
		sc.idle = false
		sc.mu.Unlock()
		if sc.tc != nil {
			sc.tc.keptAlive.Store(false)
			sc.tc.waitingSince.Store(arrived)
		}
		sc.setReadDeadline(after(arrived, headers))
		// A plain head was whole in the buffer when its first byte was
		// seen: it ended at arrived, which need not be read again.
		req := readPlainHead(sc.br, &sc.plain)
		plain, headEnd := req != nil, arrived
		if !plain {
			var err error
			if req, err = http.ReadRequest(sc.br); err != nil {
				sc.refuse(err)
				return
			}
			headEnd = MonoNow()
		}
		sc.lr.N = 1<<63 - 1 // the body is bounded by the handler
		// The body within ReadTimeout of the first byte, the answer within
		// WriteTimeout of the head's end, as net/http bounds them.
		sc.setReadDeadline(after(arrived, m.ReadTimeout))
		sc.setWriteDeadline(after(headEnd, m.WriteTimeout))
		if !m.serveRequest(sc, req, arrived, headEnd, plain) {
			return
		}
		sc.mu.Lock()
		sc.idle = true
		sc.mu.Unlock()
	}
}

// refuse answers a request that could not be read, as net/http would,
// unless the client just went away or was too slow.
func (sc *serverConn) refuse(err error) {
	switch {
	case sc.lr.N <= 0:
		sc.fail(http.StatusRequestHeaderFieldsTooLarge, "")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), isTimeout(err):
	case strings.HasPrefix(err.Error(), "unsupported transfer encoding"):
		// As net/http answers it, without echoing the encoding back.
		_, _ = fmt.Fprintf(sc.c, "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 29\r\n\r\nUnsupported transfer encoding")
	default:
		sc.fail(http.StatusBadRequest, "")
	}
}

// invalidHeader is why net/http's server refuses h, "" when it does not.
func invalidHeader(h http.Header) string {
	if len(h["Host"]) > 1 {
		return "too many Host headers"
	}
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return "invalid header name"
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return "invalid header value"
			}
		}
	}
	return ""
}

// fail answers a request the loop refuses itself, before any handler, and
// the connection is closed after it.
func (sc *serverConn) fail(code int, detail string) {
	body := fmt.Sprintf("%d %s", code, http.StatusText(code))
	if detail != "" {
		body += ": " + detail
	}
	_, _ = fmt.Fprintf(sc.c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// serveRequest runs the handler for req and finishes its answer; false
// when the connection must be closed.
func (m *Server) serveRequest(sc *serverConn, req *http.Request, arrived, headEnd int64, plain bool) (keep bool) {
	if req.ProtoMajor != 1 {
		sc.fail(http.StatusHTTPVersionNotSupported, "unsupported protocol version")
		return false
	}
	if req.Host == "" && req.ProtoAtLeast(1, 1) {
		sc.fail(http.StatusBadRequest, "missing required Host header")
		return false
	}
	if !httpguts.ValidHostHeader(req.Host) {
		sc.fail(http.StatusBadRequest, "malformed Host header")
		return false
	}
	// What else net/http's server checks beyond its parser (a plain head
	// has valid names and values by construction).
	if !plain {
		if why := invalidHeader(req.Header); why != "" {
			sc.fail(http.StatusBadRequest, why)
			return false
		}
	}
	keep = !req.Close && req.ProtoAtLeast(1, 1) // an HTTP/1.0 agent gets one answer per connection
	expect := ""
	if !plain { // a plain head has none (readPlainHead declines one)
		expect = req.Header.Get("Expect")
	}
	if expect != "" {
		if !strings.EqualFold(expect, "100-continue") || !req.ProtoAtLeast(1, 1) {
			// As net/http: an empty answer, and the connection closes.
			_, _ = io.WriteString(sc.c, "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
			return false
		}
		if req.ContentLength != 0 {
			// Asked to go on: the body is read next (within --read-timeout).
			_, _ = io.WriteString(sc.bw, "HTTP/1.1 100 Continue\r\n\r\n")
			if sc.bw.Flush() != nil {
				return false
			}
		}
		req.Header.Del("Expect")
	}
	if sc.remote == "" {
		sc.remote = sc.c.RemoteAddr().String()
		sc.ctx = WithConn(context.Background(), sc.c)
	}
	req.RemoteAddr = sc.remote
	ctx, cancel := context.WithCancel(sc.ctx)
	defer cancel()
	req = req.WithContext(ctx)
	body := &sc.body
	*body = eofBody{ReadCloser: req.Body}
	body.done.Store(req.Body == http.NoBody)
	req.Body = body
	// The connection's response and its header map are reused: nothing
	// holds them once the handler has returned.
	w := &sc.resp
	h := w.header
	if h == nil {
		h = http.Header{}
	}
	clear(h)
	*w = response{sc: sc, req: req, reqBody: body, header: h, contentLength: -1, closeAfter: !keep, arrived: arrived, pending: w.pending[:0]}
	// A request still being answered after closeWatchDelay (a session
	// stream, a slow tool) gets a goroutine that notices the agent
	// leaving, so the upstream exchange is closed with it; a quick
	// tools/call never pays for one.
	watch := &sc.closeWatch // stopped below: the next request reuses it
	*watch = closeWatch{sc: sc, cancel: cancel, body: body}
	sc.mu.Lock()
	sc.cancel, sc.watch = cancel, watch
	sc.mu.Unlock()
	sc.serving.Store(max(headEnd, 1)) // served from the head's end: a clock read less
	ok := w.run(m.Handler, m.Log)
	sc.serving.Store(0)
	sc.mu.Lock()
	sc.cancel, sc.watch = nil, nil
	sc.mu.Unlock()
	if !watch.stop() {
		ok = false
	}
	finished := ok && w.finish()
	sc.setReadDeadline(0)
	sc.setWriteDeadline(0)
	if !finished || w.closeAfter {
		sc.linger = ok && !body.done.Load()
		return false
	}
	// An answer sent before the handler returned (a stream) could not say
	// Connection: close; keep the connection only if the rest of the body
	// can still be read out.
	if !w.drainBody() {
		sc.linger = true
		return false
	}
	return keep
}

// closeWatchDelay is how long a request is served before its connection
// is watched for the agent leaving.
const closeWatchDelay = 100 * time.Millisecond

// closeWatch cancels a request whose agent closes the connection. The
// sweeper starts it (fire), only once the request's body has been read
// (the watcher and the handler must not read the connection together),
// and stop reports whether the connection is still usable. Bytes the
// agent sends meanwhile (its next request) stay in the reader.
type closeWatch struct {
	sc     *serverConn
	cancel func()
	body   *eofBody

	mu      sync.Mutex
	started bool
	stopped bool
	done    chan error
}

func (cw *closeWatch) fire() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.stopped || cw.started || !cw.body.done.Load() {
		return
	}
	cw.started, cw.done = true, make(chan error, 1)
	go func() {
		_, err := cw.sc.br.Peek(1)
		if err != nil && !isTimeout(err) {
			cw.cancel()
		}
		cw.done <- err
	}()
}

func (cw *closeWatch) stop() bool {
	cw.mu.Lock()
	cw.stopped = true
	started := cw.started
	cw.mu.Unlock()
	if !started {
		return true
	}
	_ = cw.sc.c.SetReadDeadline(time.Unix(1, 0))
	err := <-cw.done
	_ = cw.sc.c.SetReadDeadline(time.Time{})
	return err == nil || isTimeout(err)
}

// eofBody notes when a request body has been read to its end.
type eofBody struct {
	io.ReadCloser
	done atomic.Bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done.Store(true)
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// response is the http.ResponseWriter of Server. Like net/http's, it
// holds a small answer until the handler returns and sends it with a
// Content-Length; one that is flushed or grows past a buffer goes out
// chunked.
type response struct {
	sc            *serverConn
	req           *http.Request
	reqBody       *eofBody
	header        http.Header
	status        int
	contentLength int64 // from the handler's Content-Length header, -1 if none
	pending       []byte
	sent          bool // the status line and headers are written
	chunked       bool
	chunks        io.WriteCloser
	written       int64
	closeAfter    bool
	failed        error
	arrived       int64 // when the request's first byte was read (MonoNow)
}

const responseBuffer = 4 << 10

func (w *response) Header() http.Header { return w.header }

// ArrivedAt is when the request's first byte was read, in MonoNow
// nanoseconds: where the time the proxy holds it starts (requestArrival).
func (w *response) ArrivedAt() int64 { return w.arrived }

func (w *response) WriteHeader(code int) {
	if w.status != 0 || code < 200 {
		return // interim answers are not relayed (the forwarder skips them)
	}
	w.status = code
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.contentLength = n
		} else {
			w.header.Del("Content-Length")
		}
	}
}

func (w *response) bodyAllowed() bool {
	return w.req.Method != http.MethodHead && w.statusAllowsBody()
}

func (w *response) statusAllowsBody() bool {
	return w.status != http.StatusNoContent && w.status != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed != nil {
		return 0, w.failed
	}
	if w.req.Method == http.MethodHead && w.statusAllowsBody() {
		// As net/http: counted (a HEAD answer says the length a GET's
		// body would have) and not sent.
		w.written += int64(len(p))
		return len(p), nil
	}
	if !w.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	if w.contentLength >= 0 && w.written+int64(len(p)) > w.contentLength {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.sent {
		if len(w.pending)+len(p) <= responseBuffer {
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		if err := w.sendHeader(false); err != nil {
			return 0, err
		}
	}
	return w.body(p)
}

func (w *response) body(p []byte) (int, error) {
	var err error
	if w.chunked {
		_, err = w.chunks.Write(p)
	} else {
		_, err = w.sc.bw.Write(p)
	}
	if err != nil {
		w.failed = err
		return 0, err
	}
	return len(p), nil
}

// sendHeader writes the status line and headers, framing the body by
// Content-Length when it is known (final: the handler returned) or
// declared, chunked otherwise.
func (w *response) sendHeader(final bool) error {
	w.sent = true
	bw := w.sc.bw
	if w.status == http.StatusOK {
		_, _ = bw.WriteString("HTTP/1.1 200 OK\r\n")
	} else {
		fmt.Fprintf(bw, "HTTP/1.1 %03d %s\r\n", w.status, http.StatusText(w.status))
	}
	h := w.header
	// Content-Length and Date are written as they are known, not set in
	// the header map first: two allocations and a time format a
	// decision less.
	switch {
	case final && w.req.Method == http.MethodHead && w.statusAllowsBody() && w.written > 0 && w.contentLength < 0:
		writeContentLength(bw, w.written)
	case !w.bodyAllowed():
	case w.contentLength >= 0:
	case final:
		w.contentLength = int64(len(w.pending))
		writeContentLength(bw, w.contentLength)
	case w.req.ProtoAtLeast(1, 1):
		w.chunked = true
		w.chunks = httputil.NewChunkedWriter(bw)
		h.Set("Transfer-Encoding", "chunked")
	default:
		w.closeAfter = true // an HTTP/1.0 body of unknown length ends with the connection
	}
	if w.closeAfter {
		h.Set("Connection", "close")
	}
	if _, ok := h["Date"]; !ok {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(httpDate())
		_, _ = bw.WriteString("\r\n")
	}
	if err := writeHeader(bw, h); err != nil {
		w.failed = err
		return err
	}
	_, _ = bw.WriteString("\r\n")
	pending := w.pending
	w.pending = pending[:0] // kept for the connection's next answer
	if len(pending) > 0 {
		if _, err := w.body(pending); err != nil {
			return err
		}
	}
	return nil
}

// writeContentLength writes the header line, its digits formatted in
// bw's own buffer (a stack array passed to Write would escape: an
// allocation an answer).
func writeContentLength(bw *bufio.Writer, n int64) {
	_, _ = bw.WriteString("Content-Length: ")
	_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), n, 10))
	_, _ = bw.WriteString("\r\n")
}

// newlineToSpace is net/http's headerNewlineToSpace.
var newlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

// writeHeader is h.Write(bw), line for line, without its sorting (a
// pooled sorter and a slice of pairs) when h holds one name, as a
// decision's answer does (Content-Type).
func writeHeader(bw *bufio.Writer, h http.Header) error {
	if len(h) != 1 {
		return h.Write(bw)
	}
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil // dropped, as Header.Write drops it
		}
		for _, v := range vs {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(textproto.TrimString(newlineToSpace.Replace(v)))
			if _, err := bw.WriteString("\r\n"); err != nil {
				return err
			}
		}
	}
	return nil
}

// dateCache is the Date header of the current second, formatted once.
type dateCache struct {
	sec  int64
	text []byte
}

var lastDate atomic.Pointer[dateCache]

// httpDate is now as a Date header value (http.TimeFormat).
func httpDate() []byte {
	now := time.Now()
	if d := lastDate.Load(); d != nil && d.sec == now.Unix() {
		return d.text
	}
	d := &dateCache{sec: now.Unix(), text: now.UTC().AppendFormat(nil, http.TimeFormat)}
	lastDate.Store(d)
	return d.text
}

// FlushError sends what is written so far (http.ResponseController).
func (w *response) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed != nil {
		return w.failed
	}
	if !w.sent {
		if err := w.sendHeader(false); err != nil {
			return err
		}
	}
	if err := w.sc.bw.Flush(); err != nil {
		w.failed = err
		return err
	}
	return nil
}

// Flush is http.Flusher.
func (w *response) Flush() { _ = w.FlushError() }

// SetReadDeadline serves http.ResponseController: kept by the sweeper.
func (w *response) SetReadDeadline(t time.Time) error {
	w.sc.setReadDeadline(monoOf(t))
	return nil
}

// SetWriteDeadline serves http.ResponseController: kept by the sweeper.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.sc.setWriteDeadline(monoOf(t))
	return nil
}

// run calls h; false when it aborted the answer (http.ErrAbortHandler) or
// panicked, either of which closes the connection, as net/http does.
func (w *response) run(h http.Handler, log *slog.Logger) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			if v != http.ErrAbortHandler {
				log.Error("handler panicked", "panic", v, "path", w.req.URL.Path)
			}
		}
	}()
	h.ServeHTTP(w, w.req)
	return true
}

// drainBody reads out what the handler left of the request body, up to
// maxDrainBytes; false when more is left or it cannot be read.
func (w *response) drainBody() bool {
	if w.reqBody.done.Load() {
		return true
	}
	if w.req.ContentLength > maxDrainBytes {
		return false // declared too long to read out, as net/http judges it
	}
	// Within the request's own deadline (ReadTimeout), if it has one: a
	// body whose time is up is not read on, as net/http does not.
	d := w.sc.readDeadline.at.Load()
	if d == expiredDeadline {
		return false
	}
	limit := MonoNow() + int64(drainTimeout)
	if d > 0 && d < limit {
		limit = d
	}
	w.sc.setReadDeadline(limit)
	defer w.sc.setReadDeadline(0)
	n, err := io.CopyN(io.Discard, w.reqBody, maxDrainBytes+1)
	return n <= maxDrainBytes && err == io.EOF
}

// drainTimeout bounds reading out a body the handler left.
const drainTimeout = time.Second

// finish completes the answer; false when the connection cannot carry
// another one.
func (w *response) finish() bool {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed != nil {
		return false
	}
	if !w.sent {
		// A handler that says Connection: close has the connection
		// closed after its answer, as net/http does (the sidecar says it
		// when it stops reading a body, at --max-body-bytes-in-flight).
		if _, said := w.header["Connection"]; said && httpguts.HeaderValuesContainsToken(w.header["Connection"], "close") {
			w.closeAfter = true
		}
		// As net/http does before its headers: read out what the handler
		// left of the body, or say Connection: close, so the agent never
		// sends its next request on a connection about to be closed.
		if !w.closeAfter && !w.drainBody() {
			w.closeAfter = true
		}
		if err := w.sendHeader(true); err != nil {
			return false
		}
	}
	if w.chunked {
		if w.chunks.Close() != nil {
			return false
		}
		_, _ = w.sc.bw.WriteString("\r\n")
	}
	if w.contentLength >= 0 && w.written != w.contentLength && w.bodyAllowed() {
		w.closeAfter = true // a short body: the agent must not read the next answer as its rest
	}
	return w.sc.bw.Flush() == nil
}
