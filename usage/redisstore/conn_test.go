package redisstore

import (
	"bufio"
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
)

// TestReadReplyReadsRESP2: every reply type the scripts and the
// handshake answer with.
func TestReadReplyReadsRESP2(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{"+OK\r\n", "OK"},
		{":0\r\n", int64(0)},
		{":-12\r\n", int64(-12)},
		{"$0\r\n\r\n", ""},
		{"$5\r\nab\r\nc\r\n", "ab\r\nc"},
		{"$-1\r\n", nil},
		{"*-1\r\n", nil},
		{"*0\r\n", []any{}},
		{"*2\r\n$1\r\n3\r\n$0\r\n\r\n", []any{"3", ""}},
		{"*2\r\n*1\r\n:1\r\n+x\r\n", []any{[]any{int64(1)}, "x"}},
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(tc.in)))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
	_, err := readReply(bufio.NewReader(strings.NewReader("-NOSCRIPT No matching script.\r\n")))
	if se, ok := err.(serverError); !ok || string(se) != "NOSCRIPT No matching script." {
		t.Errorf("an error reply: %#v, want the server's error", err)
	}
}

// TestReadReplyRefusesMalformedReplies: a reply that is not RESP2, or
// is cut short, is an error saying what is wrong (and the connection is
// then closed by run), never a value.
func TestReadReplyRefusesMalformedReplies(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "EOF"},
		{"+OK", "EOF"},
		{"+OK\n", "malformed reply"},
		{"\r\n", "malformed reply"},
		{"?x\r\n", "unknown type '?'"},
		{":1x\r\n", "malformed integer reply"},
		{"$x\r\n", "malformed bulk length"},
		{"$-2\r\n", "malformed bulk length"},
		{"$" + strconv.Itoa(maxReply+1) + "\r\n", "malformed bulk length"},
		{"$3\r\nab", "EOF"},
		{"$2\r\nabcd", "no CRLF after it"},
		{"*x\r\n", "malformed array length"},
		{"*" + strconv.Itoa(maxReply+1) + "\r\n", "malformed array length"},
		{"*2\r\n$1\r\n3\r\n", "EOF"},
		{"*1\r\n-ERR inside\r\n", "an error in an array reply: ERR inside"},
		{strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n", "nested deeper than"},
		{"-" + strings.Repeat("x", 5000) + "\r\n", "a line longer than"},
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(tc.in)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %#v, %v; want an error with %q", tc.in, got, err, tc.want)
		}
		if _, ok := err.(serverError); ok {
			t.Errorf("%q: a malformed reply read as the server's error reply %v", tc.in, err)
		}
	}
}

// connectionsReceived is the server's count of connections accepted.
func connectionsReceived(t *testing.T, admin *redis.Client) int {
	t.Helper()
	info, err := admin.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no total_connections_received in INFO stats")
	return 0
}

// TestAnIdleConnectionIsUsedAgain: Reserve and Release keep their
// connection for the next call, also once the last call's deadline has
// passed (the check that it is still open must not trip on it).
func TestAnIdleConnectionIsUsedAgain(t *testing.T) {
	srv := redistest.Start(t)
	timeout := 100 * time.Millisecond
	s := openWith(t, srv, "agents", timeout)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2})
	t.Cleanup(func() { _ = admin.Close() })
	q := rate("Policy/p/r/rateLimit", 100, time.Hour)
	reserve(t, s, q)
	before := connectionsReceived(t, admin)
	last := time.Now()
	for range 3 {
		// What is tested is a deadline passing.
		waitUntil(last.Add(2 * timeout))
		r := reserve(t, s, q)
		if err := s.Release(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		last = time.Now()
	}
	if after := connectionsReceived(t, admin); after != before {
		t.Fatalf("%d connections accepted by the server for 6 calls, want none: the idle connection is used again", after-before)
	}
}

// TestAfterARestartNoClosedConnectionIsUsed: the idle connections to a
// server that was restarted are closed; the first Reserve after it
// answers is counted, on a new connection, with the script sent again.
func TestAfterARestartNoClosedConnectionIsUsed(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, "agents")
	q := rate("Policy/p/r/rateLimit", 100, time.Hour)
	// Several connections idle at once.
	done := make(chan error, 4)
	for range 4 {
		go func() { _, err := s.Reserve(context.Background(), time.Now(), []engine.SharedQuery{q}); done <- err }()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	srv.Stop()
	srv.Restart()
	for i := range 4 {
		if r := reserve(t, s, q); r.Used[0] != float64(i) {
			t.Fatalf("reservation %d after the restart: used %v, want %d", i+1, r.Used, i)
		}
	}
}

// aclCommands are the commands docs/shared-limits.md grants toolgate's
// ACL user: the sidecar's own and those its scripts call.
var aclCommands = []any{"+eval", "+evalsha", "+ping", "+select", "+time", "+zremrangebyscore", "+zremrangebyrank", "+zcard",
	"+zadd", "+zrem", "+pexpire", "+hgetall", "+hdel", "+hincrbyfloat", "+hexists"}

// TestReserveAuthenticatesAndSelectsTheDB: an ACL user with its password,
// the commands the docs grant it, and a database other than 0: rate
// limits and token budgets are counted and given back, in that database.
func TestReserveAuthenticatesAndSelectsTheDB(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("admin-pw-5"))
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "admin-pw-5", Protocol: 2})
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	// What docs/shared-limits.md asks for, and nothing more (no SCRIPT
	// LOAD: the first call sends each script with EVAL).
	acl := append([]any{"ACL", "SETUSER", "toolgate", "on", ">toolgate-pw-8", "~toolgate:*"}, aclCommands...)
	if err := admin.Do(ctx, acl...).Err(); err != nil {
		t.Fatal(err)
	}
	s := openConfig(t, Config{URL: "redis://toolgate@" + srv.Addr + "/3", Namespace: "agents", PasswordFile: passwordFile(t, "toolgate-pw-8")})
	q, b := rate("Policy/p/r/rateLimit", 100, time.Hour), budget("Policy/p/b/tokenBudget", 100, time.Hour, 5)
	for i := range 2 {
		r := reserve(t, s, q, b)
		if r.Used[0] != float64(i) || r.Used[1] != float64(5*i) {
			t.Fatalf("reservation %d: used %v", i+1, r.Used)
		}
	}
	if err := s.Release(ctx, reserve(t, s, q, b)); err != nil {
		t.Fatal(err)
	}
	for db, want := range map[int]int{0: 0, 3: 2} {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "admin-pw-5", DB: db, Protocol: 2})
		keys, err := c.Keys(ctx, "toolgate:*").Result()
		_ = c.Close()
		if err != nil || len(keys) != want {
			t.Fatalf("DB %d holds %v (%v), want %d counters", db, keys, err, want)
		}
	}
}

// FuzzReadReply: whatever a server (or something posing as one) sends,
// readReply returns a value or an error, never panics, and reads a
// server's error only from a reply that is one.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", ":1\r\n", "$3\r\nabc\r\n", "$-1\r\n", "*2\r\n$1\r\n3\r\n$0\r\n\r\n", "-ERR x\r\n", "*1\r\n-ERR x\r\n", "*1\r\n*1\r\n*1\r\n:1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		_, err := readReply(bufio.NewReader(strings.NewReader(string(in))))
		if _, ok := err.(serverError); ok && in[0] != '-' {
			t.Fatalf("%q: a server error from a reply that is not one: %v", in, err)
		}
	})
}
