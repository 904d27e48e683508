package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing t with cond's last
// explanation after 30 s: a guard against hangs, not a timing assertion.
func Eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	EventuallyWithin(t, 30*time.Second, 20*time.Millisecond, what, cond)
}

// EventuallyWithin is Eventually with its own deadline and polling
// interval: for waits that take longer, or whose every look costs a
// process or a round trip through a real cluster.
func EventuallyWithin(t testing.TB, waitFor, poll time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %s", what, waitFor, why)
		}
		time.Sleep(poll)
	}
}
