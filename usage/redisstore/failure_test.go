package redisstore

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/usage"
)

// margin is what a failure may take past the timeout on a loaded test
// machine (two cores shared by several test binaries).
const margin = 150 * time.Millisecond

func passwordFile(t *testing.T, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(pw), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenRefusesAWrongPassword: a wrong password, none where one is
// required, or one the server does not expect, is a clear error at Open
// that does not repeat the password; the right one (with the newline a
// Secret file often ends with) opens.
func TestOpenRefusesAWrongPassword(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("right-pw-31"))
	url := "redis://" + srv.Addr + "/0"
	for _, tc := range []struct {
		name, url, password, want string
	}{
		{"wrong password", url, "wrong-pw-47\n", "authentication failed (WRONGPASS"},
		{"no password", url, "", "authentication failed (NOAUTH"},
		{"unknown ACL user", "redis://mallory@" + srv.Addr + "/0", "right-pw-31", "authentication failed (WRONGPASS"},
	} {
		c := Config{URL: tc.url, Namespace: "agents"}
		if tc.password != "" {
			c.PasswordFile = passwordFile(t, tc.password)
		}
		s, err := Open(context.Background(), c)
		if err == nil {
			_ = s.Close()
			t.Errorf("%s: opened", tc.name)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), srv.Addr) {
			t.Errorf("%s: %v, want an error naming the server with %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), "-pw-") {
			t.Errorf("%s: the error repeats a password: %v", tc.name, err)
		}
	}
	s := openConfig(t, Config{URL: url, Namespace: "agents", PasswordFile: passwordFile(t, "right-pw-31\n")})
	reserve(t, s, rate("Policy/p/r/rateLimit", 1, time.Hour))

}

// TestOpenRefusesADBTheServerLacks: a DB index past the server's
// databases is an error at Open naming the index and the server's count.
func TestOpenRefusesADBTheServerLacks(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--databases", "4"))
	_, err := Open(context.Background(), Config{URL: "redis://" + srv.Addr + "/9", Namespace: "agents"})
	if err == nil || !strings.Contains(err.Error(), "DB index 9 is out of range on this server (databases=4)") {
		t.Fatalf("DB 9 of 4: %v", err)
	}
	if errors.Is(err, usage.ErrUnavailable) {
		t.Errorf("a configuration error is not ErrUnavailable (nothing to retry): %v", err)
	}
	openConfig(t, Config{URL: "redis://" + srv.Addr + "/3", Namespace: "agents"})
}

// TestOpenFailsWhenNothingListens: an unreachable server is
// ErrUnavailable at Open, within the timeout.
func TestOpenFailsWhenNothingListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	start := time.Now()
	_, err = Open(context.Background(), Config{URL: "redis://" + addr + "/0", Namespace: "agents"})
	if !errors.Is(err, usage.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("nothing on %s: %v, want ErrUnavailable, connection refused", addr, err)
	}
	if took := time.Since(start); took > DefaultTimeout+margin {
		t.Errorf("Open took %s", took)
	}
}

// TestAKilledRedisFailsClosedAndRecovers: with the server killed,
// Reserve, Release and Check fail within the timeout with ErrUnavailable;
// once it is restarted on the same port the same Store works again, with
// no reopening.
func TestAKilledRedisFailsClosedAndRecovers(t *testing.T) {
	srv := redistest.Start(t)
	s := openWith(t, srv, "agents", DefaultTimeout)
	q := rate("Policy/p/r/rateLimit", 10, time.Hour)
	r := reserve(t, s, q)
	srv.Stop()
	for i := range 3 {
		start := time.Now()
		_, err := s.Reserve(context.Background(), time.Now(), nil)
		if err != nil {
			t.Fatalf("no counters needs no server: %v", err)
		}
		_, err = s.Reserve(context.Background(), time.Now(), []engine.SharedQuery{q})
		took := time.Since(start)
		if !errors.Is(err, usage.ErrUnavailable) {
			t.Fatalf("reserve %d with Redis killed: %v, want ErrUnavailable", i, err)
		}
		if took > DefaultTimeout+margin {
			t.Errorf("reserve %d took %s, want at most the timeout %s (+%s)", i, took, DefaultTimeout, margin)
		}
		t.Logf("reserve %d: %v (%s)", i, err, took)
	}
	if err := s.Release(context.Background(), r); !errors.Is(err, usage.ErrUnavailable) {
		t.Errorf("release with Redis killed: %v, want ErrUnavailable", err)
	}
	if err := s.Check(context.Background()); !errors.Is(err, usage.ErrUnavailable) {
		t.Errorf("check with Redis killed: %v, want ErrUnavailable", err)
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := s.Reserve(context.Background(), time.Now(), []engine.SharedQuery{q})
		if err == nil {
			// A Redis without persistence comes back empty.
			if got.Used[0] != 0 {
				t.Errorf("after the restart: used %v, want 0", got.Used)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 5s after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	if err := s.Check(context.Background()); err != nil {
		t.Errorf("check after the restart: %v", err)
	}
}

// TestASlowRedisTimesOut: behind a proxy that delays every chunk by
// 200ms, Reserve, Release and Check fail at the 50ms timeout with
// ErrUnavailable and DeadlineExceeded, saying so; without the delay the
// Store works again; and Open through the slow proxy fails the same way.
func TestASlowRedisTimesOut(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr, 0)
	s := openConfig(t, Config{URL: "redis://" + p.Addr + "/0", Namespace: "agents"})
	q := rate("Policy/p/r/rateLimit", 10, time.Hour)
	r := reserve(t, s, q)
	p.SetDelay(200 * time.Millisecond)
	check := func(what string, err error, took time.Duration) {
		t.Helper()
		if !errors.Is(err, usage.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) ||
			!strings.Contains(err.Error(), "timed out after 50ms") {
			t.Errorf("%s through a slow network: %v, want a timeout after 50ms", what, err)
		}
		if took < DefaultTimeout-5*time.Millisecond || took > DefaultTimeout+margin {
			t.Errorf("%s took %s, want about %s", what, took, DefaultTimeout)
		}
		t.Logf("%s: %v (%s)", what, err, took)
	}
	start := time.Now()
	_, err := s.Reserve(context.Background(), time.Now(), []engine.SharedQuery{q})
	check("reserve", err, time.Since(start))
	start = time.Now()
	err = s.Release(context.Background(), r)
	check("release", err, time.Since(start))
	start = time.Now()
	err = s.Check(context.Background())
	check("check", err, time.Since(start))

	start = time.Now()
	_, err = Open(context.Background(), Config{URL: "redis://" + p.Addr + "/0", Namespace: "agents"})
	check("open", err, time.Since(start))

	p.SetDelay(0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.Reserve(context.Background(), time.Now(), []engine.SharedQuery{q})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 5s after the network is fast again: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// TestACallersDeadlineIsKept: a context that ends before the timeout ends
// the call then.
func TestACallersDeadlineIsKept(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr, 0)
	s := openConfig(t, Config{URL: "redis://" + p.Addr + "/0", Namespace: "agents", Timeout: time.Second})
	p.SetDelay(500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Reserve(ctx, time.Now(), []engine.SharedQuery{rate("Policy/p/r/rateLimit", 10, time.Hour)})
	if took := time.Since(start); !errors.Is(err, usage.ErrUnavailable) || took > 20*time.Millisecond+margin {
		t.Errorf("a 20ms context with a 1s timeout: %v after %s", err, took)
	}
}
