package redistest

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// do sends one inline command and returns the reply's first line.
func do(t *testing.T, addr string, cmds ...string) []string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	var out []string
	for _, cmd := range cmds {
		if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimSpace(line))
	}
	return out
}

// reply sends one inline command and returns the reply's first n lines.
func reply(t *testing.T, addr, cmd string, n int) []string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	var out []string
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimSpace(line))
	}
	return out
}

// TestStartStopRestart: the server answers on loopback, keeps no data
// across a restart on the same port, and refuses connections while
// stopped.
func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Fatalf("address %s, want loopback", s.Addr)
	}
	if got := do(t, s.Addr, "SET k v", "GET k"); got[0] != "+OK" || got[1] != "$1" {
		t.Fatalf("SET, GET: %q", got)
	}
	addr := s.Addr
	s.Stop()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatal("the stopped server still accepts connections")
	}
	s.Stop() // stopping twice is harmless
	s.Restart()
	if s.Addr != addr {
		t.Fatalf("restarted on %s, want %s", s.Addr, addr)
	}
	if got := do(t, s.Addr, "GET k"); got[0] != "$-1" {
		t.Fatalf("GET after the restart: %q, want nil (no persistence)", got)
	}
	if got := reply(t, s.Addr, "CONFIG GET save", 5); strings.Join(got, " ") != "*2 $4 save $0 " {
		t.Fatalf("CONFIG GET save: %q, want save empty (no snapshots)", got)
	}
}

// TestPassword: with WithPassword the server requires AUTH.
func TestPassword(t *testing.T) {
	s := Start(t, WithPassword("pw-1"))
	if got := do(t, s.Addr, "PING"); !strings.HasPrefix(got[0], "-NOAUTH") {
		t.Fatalf("PING without AUTH: %q", got)
	}
	if got := do(t, s.Addr, "AUTH pw-1", "PING"); got[0] != "+OK" || got[1] != "+PONG" {
		t.Fatalf("AUTH, PING: %q", got)
	}
}

// TestAMissingRedisServerFails: without redis-server on PATH, Start fails
// the test with how to install it; it does not skip.
func TestAMissingRedisServerFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(rec)
	}()
	<-done
	if !rec.failed || rec.skipped || !strings.Contains(rec.msg, "install redis-server (apt-get install redis-server)") {
		t.Fatalf("failed %v, skipped %v, message %q", rec.failed, rec.skipped, rec.msg)
	}
}

// recorder is a testing.TB whose Fatal records instead of failing the
// real test.
type recorder struct {
	testing.TB
	mu              sync.Mutex
	failed, skipped bool
	msg             string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Skip(...any)          { r.skipped = true; runtime.Goexit() }
func (r *recorder) Skipf(string, ...any) { r.skipped = true; runtime.Goexit() }
func (r *recorder) SkipNow()             { r.skipped = true; runtime.Goexit() }

// TestProxyDelaysEveryChunk: through the proxy a round trip takes at least
// the delay each way, and nothing once the delay is off.
func TestProxyDelaysEveryChunk(t *testing.T) {
	s := Start(t)
	p := StartProxy(t, s.Addr, 100*time.Millisecond)
	start := time.Now()
	if got := do(t, p.Addr, "PING"); got[0] != "+PONG" {
		t.Fatalf("PING through the proxy: %q", got)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("a round trip took %s through a proxy delaying each chunk 100ms", took)
	}
	p.SetDelay(0)
	start = time.Now()
	if got := do(t, p.Addr, "PING"); got[0] != "+PONG" {
		t.Fatalf("PING through the proxy: %q", got)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("a round trip took %s without delay", took)
	}
	p.Close()
	if c, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
		_ = c.Close()
		t.Error("the closed proxy still accepts connections")
	}
}
