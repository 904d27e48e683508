package sidecar

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/bundlesource"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/scenario"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The attacks below are what someone who can edit ConfigMaps in an agent's
// namespace (its editors, or the agent itself with a token) can write into
// the bundle ConfigMap. The sidecar runs its real Run loop on a mounted
// ConfigMap volume (bundle.json and bundle.sig as kubelet lays them out);
// the ConfigMap path is the same load, exercised with the real operator and
// API server in manager's TestInjectedSidecarTrustsOperatorKeys.

const signedNS = "agents"

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	must(t, os.WriteFile(path, data, 0o600))
	return path
}

// signedSidecar runs a sidecar trusting trusted's keys on a bundle volume.
func signedSidecar(t *testing.T, trusted []byte) (*testenv.Kubelet, string) {
	t.Helper()
	dir := t.TempDir()
	o := fileOnlyOptions()
	o.BundleDir, o.BundleNamespace = dir, signedNS
	o.TrustedKeys = writeFile(t, "keys.pem", trusted)
	return &testenv.Kubelet{T: t, Dir: dir}, startRun(t, o)
}

// signed is what the operator publishes: the document and its signature.
func signed(t *testing.T, key bundle.SigningKey, ns string, b engine.Bundle, counter uint64) (map[string][]byte, string) {
	t.Helper()
	doc, rev := encode(t, b)
	return map[string][]byte{bundle.Key: doc, bundle.SignatureKey: key.Sign(ns, rev, counter)}, rev
}

func rejectedFor(t *testing.T, base, reason string) float64 {
	t.Helper()
	return metricValue(t, base, `toolgate_sidecar_bundle_rejected_total{reason="`+reason+`"}`)
}

// expectRefused waits for the refusal, then checks the last good bundle
// still serves and /readyz says what was refused.
func expectRefused(t *testing.T, base, reason, servingRev string) {
	t.Helper()
	eventually(t, "a refusal for "+reason+", or the attacker's bundle served", func() bool {
		return rejectedFor(t, base, reason) >= 1 || readyRevision(t, base) != servingRev
	})
	if got := readyRevision(t, base); got != servingRev {
		t.Fatalf("after a %s bundle: serving %q, want the last good %q", reason, got, servingRev)
	}
	if got := toolDecision(t, base, "Bash"); got != "deny" {
		t.Fatalf("after a %s bundle: Bash %s, want the last good bundle's deny", reason, got)
	}
	status, body := get(t, base+"/readyz")
	var rz struct {
		Ready        bool `json:"ready"`
		LastRejected struct {
			Reason, Error string
		} `json:"lastRejected"`
	}
	must(t, json.Unmarshal([]byte(body), &rz))
	if status != 200 || !rz.Ready || rz.LastRejected.Reason != reason || rz.LastRejected.Error == "" {
		t.Fatalf("/readyz = %d %s, want ready with lastRejected.reason %q", status, body, reason)
	}
	if metricValue(t, base, "toolgate_sidecar_bundle_reload_failures_total") < 1 {
		t.Fatal("a refused bundle is not counted in bundle_reload_failures_total, which the alert watches")
	}
}

// startWithGoodBundle serves a bundle denying Bash, signed with key.
func startWithGoodBundle(t *testing.T, ring *bundle.Keyring) (*testenv.Kubelet, string, map[string][]byte, string) {
	t.Helper()
	k, base := signedSidecar(t, ring.PublicPEM())
	files, rev := signed(t, ring.Current(), signedNS, denyTools("Bash"), 10)
	k.Publish(files)
	eventually(t, "the signed bundle", func() bool { return readyRevision(t, base) == rev })
	if got := toolDecision(t, base, "Bash"); got != "deny" {
		t.Fatalf("Bash under the signed bundle: %s", got)
	}
	return k, base, files, rev
}

// allowAll is what an attacker wants served: no rule denies anything.
func allowAll() engine.Bundle {
	return engine.Bundle{Policies: []engine.Policy{{ID: "allow-all", Version: 1, DefaultEffect: "allow"}}}
}

func TestAttackForgedUnsignedBundleIsRefused(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	k, base, _, rev := startWithGoodBundle(t, ring)
	doc, _ := encode(t, allowAll())
	k.Publish(map[string][]byte{bundle.Key: doc}) // the operator's signature dropped
	expectRefused(t, base, bundlesource.ReasonUnsigned, rev)
}

func TestAttackBundleSignedWithUnknownKeyIsRefused(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	k, base, _, rev := startWithGoodBundle(t, ring)
	attacker := testenv.Keyring(t, 1).Current()
	files, _ := signed(t, attacker, signedNS, allowAll(), 1<<40)
	k.Publish(files)
	expectRefused(t, base, bundlesource.ReasonUnknownKey, rev)
}

func TestAttackTamperedSignedBundleIsRefused(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	k, base, good, rev := startWithGoodBundle(t, ring)

	// The operator's signature kept, the document replaced.
	doc, _ := encode(t, allowAll())
	k.Publish(map[string][]byte{bundle.Key: doc, bundle.SignatureKey: good[bundle.SignatureKey]})
	expectRefused(t, base, bundlesource.ReasonBadSignature, rev)

	// The signature's claims edited (a higher counter, to outrank the
	// operator's next publish) over the genuine document.
	var s bundle.Signature
	must(t, json.Unmarshal(good[bundle.SignatureKey], &s))
	s.Counter = 1 << 60
	forged, err := json.Marshal(s)
	must(t, err)
	before := rejectedFor(t, base, bundlesource.ReasonBadSignature)
	k.Publish(map[string][]byte{bundle.Key: good[bundle.Key], bundle.SignatureKey: forged})
	eventually(t, "the edited signature's refusal", func() bool { return rejectedFor(t, base, bundlesource.ReasonBadSignature) > before })
	if readyRevision(t, base) != rev {
		t.Fatal("an edited signature replaced the served bundle")
	}
}

func TestAttackBundleSignedForAnotherNamespaceIsRefused(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	k, base, _, rev := startWithGoodBundle(t, ring)
	// A genuine, newer bundle of another namespace, copied over.
	files, _ := signed(t, ring.Current(), "permissive-team", allowAll(), 99)
	k.Publish(files)
	expectRefused(t, base, bundlesource.ReasonWrongNamespace, rev)
}

func TestAttackRollbackToOlderSignedBundleIsRefused(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	k, base, older, _ := startWithGoodBundle(t, ring) // counter 10: denies Bash

	// The operator publishes a stricter bundle (counter 11).
	newer, revNewer := signed(t, ring.Current(), signedNS, denyTools("Bash", "Read"), 11)
	k.Publish(newer)
	eventually(t, "the newer bundle", func() bool { return readyRevision(t, base) == revNewer })

	// The attacker puts back the older, genuinely signed one.
	k.Publish(older)
	expectRefused(t, base, bundlesource.ReasonRollback, revNewer)
	if got := toolDecision(t, base, "Read"); got != "deny" {
		t.Fatalf("Read after the rollback attempt: %s, want the newer bundle's deny", got)
	}

	// Deleting the bundle first does not reset the counter: the sidecar
	// unloads (deny NO_POLICIES) and still refuses the older one.
	k.Publish(map[string][]byte{})
	eventually(t, "unload", func() bool { return readyRevision(t, base) == "" })
	before := rejectedFor(t, base, bundlesource.ReasonRollback)
	k.Publish(older)
	eventually(t, "the second rollback's refusal", func() bool { return rejectedFor(t, base, bundlesource.ReasonRollback) > before })
	if got := toolDecision(t, base, "Read"); got != "deny/NO_POLICIES" {
		t.Fatalf("after delete and rollback: Read %s, want deny/NO_POLICIES", got)
	}
	// The operator's next publish (a higher counter) is accepted.
	next, revNext := signed(t, ring.Current(), signedNS, denyTools("Write"), 12)
	k.Publish(next)
	eventually(t, "the next genuine bundle", func() bool { return readyRevision(t, base) == revNext })
}

func TestSameContentReSignedByANewKeyIsServed(t *testing.T) {
	old, next := testenv.Keyring(t, 1).Current(), testenv.Keyring(t, 1).Current()
	both, err := bundle.NewKeyring([]bundle.SigningKey{next, old})
	must(t, err)
	k, base := signedSidecar(t, both.PublicPEM())
	files, rev := signed(t, old, signedNS, denyTools("Bash"), 5)
	k.Publish(files)
	eventually(t, "the bundle signed by the old key", func() bool { return readyRevision(t, base) == rev })
	files, _ = signed(t, next, signedNS, denyTools("Bash"), 6)
	k.Publish(files)
	files2, rev2 := signed(t, next, signedNS, denyTools("Read"), 7)
	k.Publish(files2)
	eventually(t, "a bundle signed by the new key", func() bool { return readyRevision(t, base) == rev2 })
	if n := metricValue(t, base, "toolgate_sidecar_bundle_rejected_total"); n != 0 {
		t.Fatalf("%v bundles refused during the rotation, want 0", n)
	}
}

func TestCachedSignedBundleIsVerifiedAtStart(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	o := fileOnlyOptions()
	o.BundleDir, o.BundleNamespace, o.CacheDir = t.TempDir(), signedNS, t.TempDir()
	o.TrustedKeys = writeFile(t, "keys.pem", ring.PublicPEM())
	s, err := New(o)
	must(t, err)
	files, rev := signed(t, ring.Current(), signedNS, denyTools("Bash"), 3)
	must(t, s.loader.LoadSigned(files[bundle.Key], false, files[bundle.SignatureKey], bundlesource.OriginBundleDir))
	must(t, s.Close(t.Context()))

	restarted, err := New(o)
	must(t, err)
	restarted.loader.LoadCache()
	if restarted.Revision() != rev {
		t.Fatalf("the signed cache did not load: serving %q", restarted.Revision())
	}
	must(t, restarted.Close(t.Context()))

	// The cache tampered with while the sidecar was down.
	doc, _ := encode(t, allowAll())
	must(t, os.WriteFile(filepath.Join(o.CacheDir, bundlesource.CacheFileName(o.sourceConfig())), doc, 0o600))
	tampered, err := New(o)
	must(t, err)
	tampered.loader.LoadCache()
	if tampered.Ready() {
		t.Fatal("a tampered cache was served")
	}
	must(t, tampered.Close(t.Context()))
}

func TestWithoutTrustedKeysUnsignedBundlesLoadAndTheSidecarSaysSo(t *testing.T) {
	var logs lineBuffer
	o := fileOnlyOptions()
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	doc, rev := encode(t, denyTools("Bash"))
	o.BundleFile = writeFile(t, "bundle.json", doc)
	base := startRun(t, o)
	eventually(t, "the unsigned bundle", func() bool { return readyRevision(t, base) == rev })
	if !strings.Contains(logs.String(), "unsigned bundles are accepted") {
		t.Fatalf("the sidecar did not say at start that it accepts unsigned bundles:\n%s", logs.String())
	}
}

func TestMalformedTrustedKeysStopTheSidecarAtStart(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	for _, c := range []struct{ name, data, want string }{
		{"empty", "", "--trusted-keys"},
		{"not PEM", "not a key", "not PEM"},
		{"private key instead of public", string(ring.PrivatePEM()), "not PUBLIC KEY"},
		{"RSA-style wrong type", "-----BEGIN RSA PUBLIC KEY-----\nAAAA\n-----END RSA PUBLIC KEY-----\n", "not PUBLIC KEY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := fileOnlyOptions()
			o.BundleDir, o.BundleNamespace = t.TempDir(), signedNS
			o.TrustedKeys = writeFile(t, "keys.pem", []byte(c.data))
			err := Run(t.Context(), o, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--trusted-keys") {
				t.Fatalf("Run: %v, want an error naming --trusted-keys and %q", err, c.want)
			}
		})
	}
	o := fileOnlyOptions()
	o.BundleDir, o.TrustedKeys = t.TempDir(), filepath.Join(t.TempDir(), "missing.pem")
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--bundle-namespace") || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("Validate: %v, want the missing file and --bundle-namespace named", err)
	}
}

// The signature is checked once per bundle load; decisions read only the
// compiled bundle.
func TestSignatureIsVerifiedOncePerLoadNotPerDecision(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	o := testOptions()
	o.BundleFile, o.BundleNamespace = "unused", signedNS
	o.TrustedKeysPEM = string(ring.PublicPEM())
	s, base := newTestServer(t, o)
	files, _ := signed(t, ring.Current(), signedNS, denyTools("Bash"), 1)
	must(t, s.LoadSignedDocument(files[bundle.Key], false, files[bundle.SignatureKey]))
	for range 200 {
		if got := toolDecision(t, base, "Bash"); got != "deny" {
			t.Fatalf("Bash: %s", got)
		}
	}
	if n := s.loader.Verifications(); n != 1 {
		t.Fatalf("%d signature checks for one load and 200 decisions, want 1", n)
	}
}

// BenchmarkSignedLoad is what a bundle costs a sidecar per load (decode,
// verify when signed, compile a 1000-rule bundle); decisions pay none of it
// (BenchmarkHandler).
func BenchmarkSignedLoad(b *testing.B) {
	ring := testenv.Keyring(b, 1)
	docs, revs := make([][]byte, 2), make([]string, 2)
	for i := range docs {
		docs[i], revs[i] = encode(b, scenario.Reference(1000+i)) // two revisions, so every load compiles
	}
	for _, signedLoad := range []bool{false, true} {
		b.Run(map[bool]string{false: "unsigned", true: "signed"}[signedLoad], func(b *testing.B) {
			o := testOptions()
			o.BundleFile, o.BundleNamespace = "unused", signedNS
			if signedLoad {
				o.TrustedKeysPEM = string(ring.PublicPEM())
			}
			s, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close(context.Background()) }()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				sig := ring.Current().Sign(signedNS, revs[i%2], uint64(i+1))
				b.StartTimer()
				if err := s.LoadSignedDocument(docs[i%2], false, sig); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestAttackRollbackAfterDeleteAndRestartIsRefused(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	o := fileOnlyOptions()
	o.BundleDir, o.BundleNamespace, o.CacheDir = t.TempDir(), signedNS, t.TempDir()
	o.TrustedKeys = writeFile(t, "keys.pem", ring.PublicPEM())
	older, _ := signed(t, ring.Current(), signedNS, denyTools("Bash"), 10)
	newer, _ := signed(t, ring.Current(), signedNS, denyTools("Bash", "Read"), 11)

	s, err := New(o)
	must(t, err)
	must(t, s.loader.LoadSigned(older[bundle.Key], false, older[bundle.SignatureKey], bundlesource.OriginBundleDir))
	must(t, s.loader.LoadSigned(newer[bundle.Key], false, newer[bundle.SignatureKey], bundlesource.OriginBundleDir))
	s.loader.Unload(bundlesource.OriginBundleDir, "the ConfigMap was deleted") // clears the cached bundle
	must(t, s.Close(t.Context()))

	restarted, err := New(o)
	must(t, err)
	defer func() { _ = restarted.Close(t.Context()) }()
	restarted.loader.LoadCache()
	err = restarted.loader.LoadSigned(older[bundle.Key], false, older[bundle.SignatureKey], bundlesource.OriginBundleDir)
	if bundlesource.RejectReason(err) != bundlesource.ReasonRollback || restarted.Ready() {
		t.Fatalf("an older signed bundle after delete and restart: %v, want a rollback refusal", err)
	}
}
