// Package sharedlimits runs real `toolgate sidecar` processes against a
// real redis-server on loopback: limits with store: shared hold across
// every sidecar of a namespace, and fail closed when the store does not
// answer.
package sharedlimits

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/redistest"
)

// storeTimeout is the sidecars' --usage-store-timeout (the default), and
// answerMargin what a decision may take beyond it on a loaded CI machine.
const (
	storeTimeout = 50 * time.Millisecond
	answerMargin = 250 * time.Millisecond
)

func storeURL(r *redistest.Server) string { return "redis://" + r.Addr + "/0" }

// Three sidecars share one count: many agents calling pay at once through
// all three are allowed exactly the limit in total, never 3 x the limit.
func TestThreeSidecarsAllowExactlyTheSharedLimitInTotal(t *testing.T) {
	r := redistest.Start(t)
	bundle := writeBundle(t, sharedBundle(10))
	var procs []*proc
	for range 3 {
		procs = append(procs, startSidecar(t, "--bundle-file="+bundle, "--usage-store="+storeURL(r)))
	}
	const perSidecar, callsEach = 12, 5
	var mu sync.Mutex
	allowed, deniedByRule, other := 0, 0, []string{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, p := range procs {
		for g := range perSidecar {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range callsEach {
					d, err := p.decide("pay", fmt.Sprintf("agent-%d-%d", i, g))
					mu.Lock()
					switch {
					case err != nil:
						other = append(other, err.Error())
					case d.Decision == engine.Allow:
						allowed++
					case d.Decision == engine.Deny && d.rule() == "pay-per-namespace":
						deniedByRule++
					default:
						other = append(other, fmt.Sprintf("%+v", d))
					}
					mu.Unlock()
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("%d answers were neither allowed nor denied by the limit, e.g. %s", len(other), other[0])
	}
	if total := 3 * perSidecar * callsEach; allowed != 10 || deniedByRule != total-10 {
		t.Fatalf("%d calls through 3 sidecars: %d allowed, %d denied by pay-per-namespace; want exactly 10 allowed in total", total, allowed, deniedByRule)
	}
	// A local limit, by contrast, is counted by each sidecar alone.
	for _, p := range procs {
		for i := range 10 {
			if d := p.mustDecide("lookup", "agent-x"); d.Decision != engine.Allow {
				t.Fatalf("lookup %d through one sidecar: %+v, want allowed (local limit: its own 10)", i+1, d)
			}
		}
	}
}

// A killed Redis: calls under a shared limit are denied USAGE_UNAVAILABLE
// within the timeout, calls no limit reaches are still allowed, a failOpen
// limit lets its calls through, readiness and toolgate_usage_store_up say
// the store is down; after a restart all recovers without restarting the
// sidecars.
func TestAKilledStoreDeniesLimitedCallsAndRecoversAfterARestart(t *testing.T) {
	r := redistest.Start(t)
	bundle := writeBundle(t, sharedBundle(1000))
	p := startSidecar(t, "--bundle-file="+bundle, "--usage-store="+storeURL(r))
	if d := p.mustDecide("pay", "a"); d.Decision != engine.Allow {
		t.Fatalf("pay with the store up: %+v", d)
	}
	if v := p.metric("toolgate_usage_store_up"); v != "1" {
		t.Fatalf("toolgate_usage_store_up = %q with the store up, want 1", v)
	}

	r.Stop()
	for i := range 5 {
		began := time.Now()
		d := p.mustDecide("pay", "a")
		took := time.Since(began)
		if d.Decision != engine.Deny || d.Code != decide.CodeUsageUnavailable {
			t.Fatalf("pay %d with the store down: %+v, want deny %s", i+1, d, decide.CodeUsageUnavailable)
		}
		if !strings.Contains(d.Reason, "usage store") || !strings.Contains(d.Reason, "pay-per-namespace") {
			t.Errorf("the deny's reason %q should say the usage store failed and name the limit", d.Reason)
		}
		if took > storeTimeout+answerMargin {
			t.Errorf("pay %d with the store down took %v, more than the %v timeout + %v", i+1, took, storeTimeout, answerMargin)
		}
	}
	if d := p.mustDecide("read", "a"); d.Decision != engine.Allow {
		t.Fatalf("read (no limit) with the store down: %+v, want allowed", d)
	}
	if d := p.mustDecide("lookup", "a"); d.Decision != engine.Allow {
		t.Fatalf("lookup (local limit) with the store down: %+v, want allowed", d)
	}
	d := p.mustDecide("tip", "a")
	if d.Decision != engine.Allow || len(d.Warnings) == 0 || !strings.Contains(d.Warnings[0], "failOpen") {
		t.Fatalf("tip (failOpen) with the store down: %+v, want allowed with a warning naming failOpen", d)
	}
	waitFor(t, 5*time.Second, "readiness false and toolgate_usage_store_up 0 with the store down", func() bool {
		code, _ := p.ready()
		return code == 503 && p.metric("toolgate_usage_store_up") == "0"
	})
	t.Logf("a deny with the store down: %s", p.mustDecide("pay", "a").Reason)
	if _, body := p.ready(); !strings.Contains(body, "usage store") {
		t.Errorf("/readyz with the store down says %s; want it to name the usage store", body)
	}

	r.Restart()
	waitFor(t, 10*time.Second, "pay allowed again after the store restarted", func() bool {
		d, err := p.decide("pay", "a")
		return err == nil && d.Decision == engine.Allow
	})
	waitFor(t, 5*time.Second, "readiness true and toolgate_usage_store_up 1 after the restart", func() bool {
		code, _ := p.ready()
		return code == 200 && p.metric("toolgate_usage_store_up") == "1"
	})
}

// A store unreachable when the sidecar starts does not stop the agent:
// the sidecar starts not ready, decides calls no shared limit reaches as
// always and denies the others USAGE_UNAVAILABLE, and counts them once the
// store answers, without a restart (kubelet's restart back-off would
// otherwise keep every call of the agent waiting).
func TestAStoreUnreachableAtStartLeavesTheSidecarNotReadyUntilItAnswers(t *testing.T) {
	r := redistest.Start(t)
	url := storeURL(r)
	r.Stop()
	p := launch(t, "--bundle-file="+writeBundle(t, sharedBundle(1000)), "--usage-store="+url)
	waitFor(t, 20*time.Second, "the sidecar deciding with the store down", func() bool {
		select {
		case <-p.done:
			t.Fatalf("the sidecar exited with the store unreachable at start: %s\n%s", p.cmd.ProcessState, p.stderr.String())
		default:
		}
		_, err := p.decide("read", "a")
		return err == nil
	})
	if d := p.mustDecide("read", "a"); d.Decision != engine.Allow {
		t.Fatalf("read (no limit) with the store down since start: %+v, want allowed", d)
	}
	if d := p.mustDecide("pay", "a"); d.Decision != engine.Deny || d.Code != decide.CodeUsageUnavailable {
		t.Fatalf("pay with the store down since start: %+v, want deny %s", d, decide.CodeUsageUnavailable)
	}
	if code, body := p.ready(); code != 503 || !strings.Contains(body, "usage store") || p.metric("toolgate_usage_store_up") != "0" {
		t.Fatalf("with the store down since start: /readyz %d %q, toolgate_usage_store_up %q; want 503 naming the usage store, 0",
			code, body, p.metric("toolgate_usage_store_up"))
	}

	r.Restart()
	waitFor(t, 10*time.Second, "pay allowed once the store answers", func() bool {
		d, err := p.decide("pay", "a")
		return err == nil && d.Decision == engine.Allow
	})
	waitFor(t, 5*time.Second, "readiness true and toolgate_usage_store_up 1 once the store answers", func() bool {
		code, _ := p.ready()
		return code == 200 && p.metric("toolgate_usage_store_up") == "1"
	})
}

// A store slower than --usage-store-timeout (a loopback proxy that delays
// every chunk) denies calls under shared limits USAGE_UNAVAILABLE within
// the timeout; once it is fast again they are counted again.
func TestASlowStoreHitsTheTimeout(t *testing.T) {
	r := redistest.Start(t)
	px := redistest.StartProxy(t, r.Addr, 0)
	p := startSidecar(t, "--bundle-file="+writeBundle(t, sharedBundle(1000)), "--usage-store=redis://"+px.Addr+"/0")
	if d := p.mustDecide("pay", "a"); d.Decision != engine.Allow {
		t.Fatalf("pay through the proxy without delay: %+v", d)
	}
	px.SetDelay(4 * storeTimeout)
	for i := range 3 {
		began := time.Now()
		d := p.mustDecide("pay", "a")
		took := time.Since(began)
		if d.Decision != engine.Deny || d.Code != decide.CodeUsageUnavailable || !strings.Contains(d.Reason, "within 50ms") {
			t.Fatalf("pay %d through a store 200ms away: %+v, want deny %s saying it did not answer within 50ms", i+1, d, decide.CodeUsageUnavailable)
		}
		if took > storeTimeout+answerMargin {
			t.Errorf("pay %d through a slow store took %v, more than the %v timeout + %v", i+1, took, storeTimeout, answerMargin)
		}
	}
	if d := p.mustDecide("read", "a"); d.Decision != engine.Allow {
		t.Fatalf("read (no limit) through a slow store: %+v", d)
	}
	px.SetDelay(0)
	waitFor(t, 10*time.Second, "pay allowed again once the store is fast", func() bool {
		d, err := p.decide("pay", "a")
		return err == nil && d.Decision == engine.Allow
	})
}

// Without --usage-store, a bundle with shared limits denies their calls
// USAGE_UNAVAILABLE saying so, and allows the rest.
func TestNoUsageStoreDeniesSharedLimitsSayingSo(t *testing.T) {
	p := startSidecar(t, "--bundle-file="+writeBundle(t, sharedBundle(10)))
	d := p.mustDecide("pay", "a")
	if d.Decision != engine.Deny || d.Code != decide.CodeUsageUnavailable || !strings.Contains(d.Reason, "--usage-store") {
		t.Fatalf("pay without a usage store: %+v, want deny %s naming --usage-store", d, decide.CodeUsageUnavailable)
	}
	if d := p.mustDecide("read", "a"); d.Decision != engine.Allow {
		t.Fatalf("read without a usage store: %+v", d)
	}
}

// A wrong password, no password, a password file absent or empty, or a
// database the server does not have: the sidecar exits at start with an
// error that says which.
func TestWrongPasswordOrDatabaseStopsTheSidecarWithAClearError(t *testing.T) {
	r := redistest.Start(t, redistest.WithPassword("right-password"), redistest.WithArgs("--databases", "4"))
	bundle := "--bundle-file=" + writeBundle(t, sharedBundle(10))
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	wrong, right := file("wrong", "not-the-password\n"), file("right", "right-password\n")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"wrong password", []string{"--usage-store=" + storeURL(r), "--usage-store-password-file=" + wrong}, []string{"--usage-store", "password"}},
		{"no password", []string{"--usage-store=" + storeURL(r)}, []string{"--usage-store", "password"}},
		{"a database the server lacks", []string{"--usage-store=redis://" + r.Addr + "/9", "--usage-store-password-file=" + right}, []string{"--usage-store", "9"}},
		{"a password in the URL", []string{"--usage-store=redis://user:pw@" + r.Addr + "/0"}, []string{"--usage-store-password-file"}},
		// The file a Secret would have been mounted as, absent or empty:
		// never taken for no password.
		{"no password file", []string{"--usage-store=" + storeURL(r), "--usage-store-password-file=" + filepath.Join(dir, "absent")}, []string{"--usage-store-password-file", "absent", "no such file"}},
		{"an empty password file", []string{"--usage-store=" + storeURL(r), "--usage-store-password-file=" + file("empty", "")}, []string{"--usage-store-password-file", "is empty"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := launch(t, append([]string{bundle}, c.args...)...).exitError(20 * time.Second)
			t.Logf("the sidecar said: %s", strings.TrimSpace(out))
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the sidecar's error should contain %q:\n%s", w, out)
				}
			}
		})
	}
	// With the right password it starts and counts.
	p := startSidecar(t, bundle, "--usage-store="+storeURL(r), "--usage-store-password-file="+right)
	if d := p.mustDecide("pay", "a"); d.Decision != engine.Allow {
		t.Fatalf("pay with the right password: %+v", d)
	}
}
