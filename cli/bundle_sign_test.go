package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

func payCap(limit string) string {
	return `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: pay-cap, namespace: agents}
spec:
  rules:
  - id: pay-over-cap
    effect: deny
    conditions:
    - {field: tool_name, operator: eq, value: pay}
    - {field: kwargs.amount, operator: gt, value: ` + limit + `}
`
}

// signedFile reads what `toolgate bundle --signing-key -o out` wrote: the
// bundle's revision, its signature as ring verifies it for agents, and the
// signature's bytes.
func signedFile(t *testing.T, out string, ring *bundle.Keyring) (string, bundle.Signature, []byte) {
	t.Helper()
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	b, err := engine.Decode(doc)
	if err != nil {
		t.Fatalf("a sidecar would refuse the bundle written: %v", err)
	}
	sig, err := os.ReadFile(out + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ring.Trusted().Verify(sig, "agents", b.Revision)
	if err != nil {
		t.Fatalf("the signature written does not verify for agents and %s: %v", b.Revision, err)
	}
	return b.Revision, s, sig
}

// TestBundleSigningKeySignsAsTheOperator: the bundle is the one printed
// without signing; the signature verifies for the namespace and revision,
// is kept for an unchanged bundle and counts on for a changed one; a key
// file of two keys adds the endorsements and one key removes them again.
func TestBundleSigningKeySignsAsTheOperator(t *testing.T) {
	dir := t.TempDir()
	ring := testenv.Keyring(t, 2)
	keys := filepath.Join(dir, "keys.pem")
	if err := os.WriteFile(keys, ring.PrivatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	policies := testenv.WriteTree(t, map[string]string{"pay.yaml": payCap("100")})
	out := filepath.Join(dir, "bundle.json")
	sign := func(keys string) {
		t.Helper()
		if o := run(t, "", "bundle", "-f", policies, "-n", "agents", "--signing-key", keys, "-o", out); o.code != 0 || o.stdout != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
		}
	}
	sign(keys)
	printed := run(t, "", "bundle", "-f", policies, "-n", "agents")
	if written, _ := os.ReadFile(out); string(written) != printed.stdout {
		t.Fatalf("-o wrote\n%s\nwhere stdout gets\n%s", written, printed.stdout)
	}
	rev1, s1, sig1 := signedFile(t, out, ring)
	if s1.KeyID != ring.Current().ID() {
		t.Fatalf("signed by %s, want the file's first key %s", s1.KeyID, ring.Current().ID())
	}
	// Two keys: a sidecar trusting only the second accepts the first
	// through its endorsement, as one admitted before a promote does.
	endorsements, err := os.ReadFile(out + ".endorsements")
	if err != nil {
		t.Fatalf("no endorsements beside a two-key signature: %v", err)
	}
	second, err := bundle.NewKeyring(ring.Keys()[1:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Trusted().VerifyEndorsed(sig1, endorsements, "agents", rev1); err != nil {
		t.Fatalf("the endorsement does not carry the first key to a sidecar trusting the second: %v", err)
	}

	sign(keys)
	if _, _, again := signedFile(t, out, ring); string(again) != string(sig1) {
		t.Fatal("an unchanged bundle was signed anew")
	}

	if err := os.WriteFile(filepath.Join(policies, "pay.yaml"), []byte(payCap("50")), 0o644); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(dir, "one.pem")
	first, err := bundle.NewKeyring(ring.Keys()[:1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(one, first.PrivatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	sign(one)
	rev2, s2, _ := signedFile(t, out, ring)
	if rev2 == rev1 || s2.Counter <= s1.Counter {
		t.Fatalf("changed bundle: revision %s -> %s, counter %d -> %d: want a new revision with a higher counter", rev1, rev2, s1.Counter, s2.Counter)
	}
	if _, err := os.Stat(out + ".endorsements"); !os.IsNotExist(err) {
		t.Fatalf("a one-key signature left the earlier endorsements beside it: %v", err)
	}
}

// TestBundleSigningKeyIsRefusedWhenItCannotSign: every flag mistake is a
// usage error naming it, and nothing is written.
func TestBundleSigningKeyIsRefusedWhenItCannotSign(t *testing.T) {
	dir := t.TempDir()
	ring := testenv.Keyring(t, 1)
	keys := filepath.Join(dir, "keys.pem")
	if err := os.WriteFile(keys, ring.PrivatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	notKeys := filepath.Join(dir, "pub.pem")
	if err := os.WriteFile(notKeys, ring.PublicPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	policies := testenv.WriteTree(t, map[string]string{"pay.yaml": payCap("100")})
	out := filepath.Join(dir, "bundle.json")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no namespace", []string{"--signing-key", keys, "-o", out}, "--signing-key needs -n NAMESPACE"},
		{"to stdout", []string{"-n", "agents", "--signing-key", keys}, "--signing-key needs -o FILE"},
		{"to stdout, said", []string{"-n", "agents", "--signing-key", keys, "-o", "-"}, "--signing-key needs -o FILE"},
		{"missing key file", []string{"-n", "agents", "--signing-key", filepath.Join(dir, "nope.pem"), "-o", out}, "--signing-key: open"},
		{"public keys", []string{"-n", "agents", "--signing-key", notKeys, "-o", out}, "--signing-key " + notKeys + ":"},
		{"a directory", []string{"-n", "agents", "--signing-key", keys, "-o", dir}, "is a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := run(t, "", append([]string{"bundle", "-f", policies}, c.args...)...)
			if o.code != int(exitcode.Usage) || !strings.Contains(o.stderr, c.want) {
				t.Fatalf("exit %d, stderr %q: want usage error with %q", o.code, o.stderr, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("wrote %s: %v", out, err)
			}
			if _, err := os.Stat(out + ".sig"); !os.IsNotExist(err) {
				t.Fatalf("wrote %s.sig: %v", out, err)
			}
		})
	}
}

// TestBundleSigningKeyServesATrustingSidecar: the real binary, as CLI and
// as sidecar with --trusted-keys. The signed file is served, and so is the
// next one signed over it while the sidecar runs (never refused as a
// rollback); a sidecar for another namespace refuses it.
func TestBundleSigningKeyServesATrustingSidecar(t *testing.T) {
	bin := toolgateBinary(t)
	dir := t.TempDir()
	ring := testenv.Keyring(t, 1)
	keys, trusted := filepath.Join(dir, "keys.pem"), filepath.Join(dir, "trusted.pem")
	if err := os.WriteFile(keys, ring.PrivatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trusted, ring.PublicPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	policies := testenv.WriteTree(t, map[string]string{"pay.yaml": payCap("100")})
	out := filepath.Join(dir, "bundle.json")
	sign := func() string {
		t.Helper()
		if o := runBinary(t, "", nil, "bundle", "-f", policies, "-n", "agents", "--signing-key", keys, "-o", out); o.code != 0 {
			t.Fatalf("bundle: exit %d: %s", o.code, o.stderr)
		}
		rev, _, _ := signedFile(t, out, ring)
		return rev
	}
	rev1 := sign()

	sidecar := func(namespace string) string {
		addr := testenv.FreeLoopbackAddr(t)
		cmd := exec.Command(bin, "sidecar", "--bundle-file", out, "--bundle-namespace", namespace, "--trusted-keys", trusted,
			"--decision-log", "none", "--listen", addr, "--poll-interval", "100ms")
		log, err := os.Create(filepath.Join(dir, namespace+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = log.Close() })
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); <-exited })
		return "http://" + addr + "/readyz"
	}
	type readyz struct {
		Ready          bool
		BundleRevision string
		LastRejected   *struct{ Reason, Error string }
	}
	probe := func(url string) (readyz, string) {
		var r readyz
		resp, err := http.Get(url)
		if err != nil {
			return r, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return r, err.Error()
		}
		return r, resp.Status
	}

	agents := sidecar("agents")
	testenv.Eventually(t, "the sidecar for agents serves the signed bundle", func() (bool, string) {
		r, status := probe(agents)
		return r.Ready && r.BundleRevision == rev1, status + " " + r.BundleRevision
	})
	if err := os.WriteFile(filepath.Join(policies, "pay.yaml"), []byte(payCap("50")), 0o644); err != nil {
		t.Fatal(err)
	}
	rev2 := sign()
	testenv.Eventually(t, "the sidecar serves the bundle signed over the first", func() (bool, string) {
		r, status := probe(agents)
		if r.LastRejected != nil && r.LastRejected.Reason == "rollback" {
			t.Fatalf("the re-signed bundle was refused as a rollback: %s", r.LastRejected.Error)
		}
		return r.BundleRevision == rev2, status + " " + r.BundleRevision
	})

	prod := sidecar("prod")
	testenv.Eventually(t, "a sidecar for prod refuses the bundle signed for agents", func() (bool, string) {
		r, status := probe(prod)
		return !r.Ready && r.LastRejected != nil && r.LastRejected.Reason == "wrong_namespace", status
	})
}
