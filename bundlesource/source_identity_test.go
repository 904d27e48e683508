package bundlesource

import (
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/decide"
)

func TestServiceAccountFromUser(t *testing.T) {
	for user, want := range map[string][2]string{
		"system:serviceaccount:agents:billing-bot": {"agents", "billing-bot"},
		"system:serviceaccount:agents:":            {},
		"system:serviceaccount:agents":             {},
		"system:serviceaccount::x":                 {},
		"system:serviceaccount:a:b:c":              {},
		"admin":                                    {},
		"system:serviceaccounts:agents":            {},
	} {
		ns, name, ok := ServiceAccountFromUser(user)
		if ok != (want[1] != "") || ns != want[0] || name != want[1] {
			t.Errorf("%q: %q %q %v, want %q", user, ns, name, ok, want)
		}
	}
}

// TestServiceAccountIsWhatTheAPIServerSays: a sidecar watching its bundle
// through the API binds the ServiceAccount the API server names, not
// --service-account; keeps it across a restart in its own cache (the API
// server may be unreachable then); and binds none before the API server
// has ever answered, or for a ServiceAccount of another namespace.
func TestServiceAccountIsWhatTheAPIServerSays(t *testing.T) {
	cache := t.TempDir()
	newLoader := func(flag string) (*Loader, *decide.Decider) {
		d, err := decide.NewInProcess(decide.Config{ServiceAccount: flag})
		must(t, err)
		l := New(Config{ConfigMap: "agents/toolgate-bundle", CacheDir: cache}, d, NewMetrics(prometheus.NewRegistry(), "t_"), nil)
		return l, d
	}
	l, d := newLoader("billing-bot")
	if sa := d.State().ServiceAccount; sa != "" {
		t.Fatalf("before the API server answered: %q, want none (not the flag)", sa)
	}
	l.bindServiceAccount("system:serviceaccount:agents:triage-bot", "agents")
	if sa := d.State().ServiceAccount; sa != "triage-bot" {
		t.Fatalf("after SelfSubjectReview: %q, want triage-bot", sa)
	}
	// Restarted: the cached answer stands until the API server answers.
	_, d = newLoader("billing-bot")
	if sa := d.State().ServiceAccount; sa != "triage-bot" {
		t.Errorf("after a restart: %q, want the cached triage-bot", sa)
	}
	l, d = newLoader("billing-bot")
	l.bindServiceAccount("system:serviceaccount:other:billing-bot", "agents")
	if sa := d.State().ServiceAccount; sa != "" {
		t.Errorf("a ServiceAccount of another namespace: %q, want none", sa)
	}
	l.bindServiceAccount("kubernetes-admin", "agents")
	if sa := d.State().ServiceAccount; sa != "billing-bot" {
		t.Errorf("credentials that are no ServiceAccount's: %q, want --service-account", sa)
	}
	// A file source never asks: the flag stands.
	d2, err := decide.NewInProcess(decide.Config{ServiceAccount: "billing-bot"})
	must(t, err)
	New(Config{BundleFile: "/nonexistent", CacheDir: t.TempDir()}, d2, NewMetrics(prometheus.NewRegistry(), "t_"), nil)
	if sa := d2.State().ServiceAccount; sa != "billing-bot" {
		t.Errorf("file source: %q, want the flag", sa)
	}
	if _, err := os.Stat(cache); err != nil {
		t.Fatal(err)
	}
}
