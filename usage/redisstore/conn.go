package redisstore

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// fastPool holds the connections Reserve and Release use: plain RESP2
// over a net.Conn, one command and its reply at a time.
//
// Why not go-redis, which Open, Check and the script loading use: a
// limited call's round trip is the whole of what a shared limit adds,
// and go-redis's per-command path (hooks, pool health and metrics
// callbacks, the command object, deadlines set twice) measured about 20us
// of it at p50 on a 2-core machine where the processes take turns
// (make measure-limits; the floor it prints is this package's Reserve).
// These connections do only what that path needs: EVALSHA (EVAL when the
// server lacks the script), the reply, and the handshake (AUTH, SELECT)
// go-redis would have made.
type fastPool struct {
	addr     string
	tls      *tls.Config
	username string
	password string
	db       int
	timeout  time.Duration
	// slots bounds the connections open (idle or in use) at poolSize.
	slots  chan struct{}
	idle   chan *fastConn
	closed atomic.Bool
	// failed is the last dial's failure, while it is recent: a server that
	// could not be reached is dialed again at most once per dialBackoff,
	// and the calls in between fail at once with its error rather than
	// each wait out a dial (as go-redis's pool does).
	failed atomic.Pointer[dialFailure]
}

// dialBackoff is how long a failed dial answers for the server (the
// sidecar checks the store as often).
const dialBackoff = time.Second

type dialFailure struct {
	err error
	at  time.Time
}

func newFastPool(e endpoint, password string, tc *tls.Config, timeout time.Duration) *fastPool {
	return &fastPool{addr: e.addr, tls: tc, username: e.username, password: password, db: e.db, timeout: timeout,
		slots: make(chan struct{}, poolSize), idle: make(chan *fastConn, poolSize)}
}

// fastConn is one connection: what is read, and a buffer commands are
// written from.
type fastConn struct {
	c   net.Conn
	rd  *bufio.Reader
	buf []byte
}

// get is an idle connection still open, or a new one once a slot frees.
func (p *fastPool) get(ctx context.Context) (*fastConn, error) {
	for {
		if p.closed.Load() {
			return nil, redis.ErrClosed
		}
		select {
		case fc := <-p.idle:
			if alive(fc.c) {
				return fc, nil
			}
			p.discard(fc)
			continue
		default:
		}
		select {
		case fc := <-p.idle:
			if alive(fc.c) {
				return fc, nil
			}
			p.discard(fc)
		case p.slots <- struct{}{}:
			if f := p.failed.Load(); f != nil && time.Since(f.at) < dialBackoff {
				<-p.slots
				return nil, f.err
			}
			fc, err := p.dial(ctx)
			if err != nil {
				<-p.slots
				var se serverError
				if !errors.As(err, &se) {
					// Unreachable or too slow to connect within the
					// timeout, not refusing (a wrong password is told
					// at once, every time).
					p.failed.Store(&dialFailure{err: err, at: time.Now()})
				}
				return nil, err
			}
			p.failed.Store(nil)
			return fc, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// put gives a connection back, idle; after close, closed.
func (p *fastPool) put(fc *fastConn) {
	if p.closed.Load() {
		p.discard(fc)
		return
	}
	p.idle <- fc
	if p.closed.Load() {
		// close ran in between: drain again.
		p.close()
	}
}

func (p *fastPool) discard(fc *fastConn) {
	_ = fc.c.Close()
	<-p.slots
}

// close closes the idle connections, and those in use as they are given
// back; the pool dials no more.
func (p *fastPool) close() {
	p.closed.Store(true)
	for {
		select {
		case fc := <-p.idle:
			p.discard(fc)
		default:
			return
		}
	}
}

// dial connects, wraps TLS, authenticates and selects the database.
func (p *fastPool) dial(ctx context.Context) (*fastConn, error) {
	d := net.Dialer{Timeout: p.timeout}
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if p.tls != nil {
		tc := tls.Client(c, p.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return nil, err
		}
		c = tc
	}
	fc := &fastConn{c: c, rd: bufio.NewReaderSize(c, maxLine)}
	var cmds [][]any
	switch {
	case p.password != "" && p.username != "":
		cmds = append(cmds, []any{"AUTH", p.username, p.password})
	case p.password != "":
		cmds = append(cmds, []any{"AUTH", p.password})
	}
	if p.db != 0 {
		cmds = append(cmds, []any{"SELECT", p.db})
	}
	for _, cmd := range cmds {
		if _, err := fc.do(cmd[0].(string), nil, cmd[1:]); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return fc, nil
}

// run runs script (EVALSHA, then EVAL when the server lacks it) on a
// connection of the pool, within ctx's deadline, and returns its reply.
// A connection that failed (not the server's error reply) is closed: what
// it would read next is unknown.
func (p *fastPool) run(ctx context.Context, script *luaScript, keys []string, args []any) (any, error) {
	fc, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = fc.c.SetDeadline(dl)
	} else {
		_ = fc.c.SetDeadline(time.Now().Add(p.timeout))
	}
	v, err := fc.eval(script, keys, args)
	var se serverError
	if err != nil && !errors.As(err, &se) {
		p.discard(fc)
		return nil, err
	}
	p.put(fc)
	return v, err
}

func (fc *fastConn) eval(script *luaScript, keys []string, args []any) (any, error) {
	v, err := fc.do("EVALSHA", []any{script.sha, len(keys)}, keys, args)
	var se serverError
	if errors.As(err, &se) && len(se) >= 8 && string(se[:8]) == "NOSCRIPT" {
		return fc.do("EVAL", []any{script.src, len(keys)}, keys, args)
	}
	return v, err
}

// do writes one command (name, then each part's values in order) and
// reads its reply.
func (fc *fastConn) do(name string, parts ...any) (any, error) {
	n := 1
	for _, part := range parts {
		switch part := part.(type) {
		case []any:
			n += len(part)
		case []string:
			n += len(part)
		}
	}
	b := fc.buf[:0]
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '\r', '\n')
	b = appendBulk(b, name)
	for _, part := range parts {
		switch part := part.(type) {
		case []any:
			for _, v := range part {
				b = appendValue(b, v)
			}
		case []string:
			for _, v := range part {
				b = appendBulk(b, v)
			}
		}
	}
	fc.buf = b
	if _, err := fc.c.Write(b); err != nil {
		return nil, err
	}
	return readReply(fc.rd)
}

func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return appendBulk(b, v)
	case int:
		return appendBulk(b, strconv.Itoa(v))
	case int64:
		return appendBulk(b, strconv.FormatInt(v, 10))
	}
	panic(fmt.Sprintf("redisstore: a command argument of type %T", v))
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// serverError is the server's error reply (-ERR ..., -NOSCRIPT ...): the
// connection stays usable. It is a go-redis redis.Error, so that fail
// reads it as it reads go-redis's.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

// maxReply bounds what one reply may hold (elements, bytes): the scripts
// answer two short strings per counter.
const maxReply = 1 << 20

// maxLine bounds a reply's line (a simple string, an error, a length):
// the server's longest errors name a script's line, well under it.
const maxLine = 4096

// maxDepth bounds how deep arrays may nest in a reply: the scripts answer
// flat ones.
const maxDepth = 4

// readReply reads one RESP2 reply: a simple string, an error, an
// integer, a bulk string (nil: nil) or an array of these.
func readReply(rd *bufio.Reader) (any, error) { return readValue(rd, 0) }

func readValue(rd *bufio.Reader, depth int) (any, error) {
	line, err := rd.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("malformed reply: a line longer than %d bytes", rd.Size())
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed reply %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return string(body), nil
	case '-':
		return nil, serverError(body)
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed integer reply %q", body)
		}
		return n, nil
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 || n > maxReply {
			return nil, fmt.Errorf("malformed bulk length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(rd, data); err != nil {
			return nil, err
		}
		if data[n] != '\r' || data[n+1] != '\n' {
			return nil, errors.New("malformed bulk string: no CRLF after it")
		}
		return string(data[:n]), nil
	case '*':
		if depth == maxDepth {
			return nil, fmt.Errorf("malformed reply: arrays nested deeper than %d", maxDepth)
		}
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 || n > maxReply {
			return nil, fmt.Errorf("malformed array length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readValue(rd, depth+1); err != nil {
				var se serverError
				if errors.As(err, &se) {
					// An error inside an array is a value here, not
					// the reply's failure: the scripts never answer one.
					return nil, fmt.Errorf("an error in an array reply: %s", se)
				}
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("malformed reply: unknown type %q", line[0])
}
