package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/internal/clienttest"
	"github.com/toolgate/toolgate/engine"
)

func newLocal(t testing.TB, path string) *Evaluator {
	t.Helper()
	l, err := New(Options{BundlePath: path})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Every sample request is decided the same in process as by the sidecar,
// from a bundle document and from the manifest directory alike.
func TestLocalDecidesAsTheSidecar(t *testing.T) {
	file := clienttest.SampleBundle(t)
	sc := clienttest.StartSidecar(t, file, nil)
	c := clienttest.NewClient(t, client.Options{URL: sc.Unix})
	fromFile, fromDir := newLocal(t, file), newLocal(t, clienttest.Samples)
	if fromFile.Revision() != fromDir.Revision() || fromFile.Revision() == "" {
		t.Fatalf("revisions differ: file %q, directory %q", fromFile.Revision(), fromDir.Revision())
	}
	names, err := filepath.Glob(filepath.Join(clienttest.Samples, "requests", "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no sample requests: %v", err)
	}
	redacted := 0
	for _, name := range names {
		req := clienttest.SampleRequest(t, filepath.Base(name))
		want := clienttest.Evaluate(t, c, req)
		if want.Redacted() {
			redacted++
		}
		for _, l := range []*Evaluator{fromFile, fromDir} {
			got := clienttest.Evaluate(t, l, req)
			if !sameDecision(got, want) {
				t.Errorf("%s: in process %+v, sidecar %+v", filepath.Base(name), got, want)
			}
		}
	}
	if redacted == 0 {
		t.Error("no sample result was redacted: the samples' redact rule was not exercised")
	}
}

// sameDecision compares two answers, a result's redactions and delivered
// text included (the sample requests carrying output are results, judged
// by result rules on both sides).
func sameDecision(a, b client.Result) bool {
	return a.Decision == b.Decision && a.Effect == b.Effect && a.Code == b.Code && a.Reason == b.Reason &&
		a.MatchedPolicyID == b.MatchedPolicyID && a.MatchedPolicyVersion == b.MatchedPolicyVersion &&
		a.MatchedRuleID == b.MatchedRuleID && a.BundleRevision == b.BundleRevision &&
		strings.Join(a.Warnings, "\n") == strings.Join(b.Warnings, "\n") &&
		slices.Equal(a.Redactions, b.Redactions) && a.RedactedText() == b.RedactedText()
}

// Go values that are not what JSON decodes into (an int, a
// map[string]int) compare as the sidecar compares them after decoding.
func TestLocalNormalizesGoValues(t *testing.T) {
	l := newLocal(t, clienttest.Samples)
	over := clienttest.Evaluate(t, l, client.Request{ToolName: "pay", AgentID: "shop-agent", Kwargs: map[string]int{"amount": 5000}})
	small := clienttest.Evaluate(t, l, client.Request{ToolName: "pay", AgentID: "shop-agent", Kwargs: struct {
		Amount   int    `json:"amount"`
		Currency string `json:"currency"`
	}{10, "EUR"}})
	want := clienttest.Evaluate(t, l, clienttest.SampleRequest(t, "pay_over_cap.json"))
	if !sameDecision(over, want) || over.Decision != engine.Deny {
		t.Errorf("amount 5000 as an int: got %+v, want %+v", over, want)
	}
	if !small.Allowed() {
		t.Errorf("amount 10 in a struct: got %+v, want allow", small)
	}
}

func TestLocalReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bundle.json")
	copyFile(t, clienttest.SampleBundle(t), path)
	l := newLocal(t, path)
	read := client.Request{ToolName: "Read", AgentID: "coder-1"}
	if res := clienttest.Evaluate(t, l, read); !res.Allowed() {
		t.Fatalf("before the reload: got %+v, want allow", res)
	}
	first := l.Revision()

	// A bundle with no policies: every call is denied NO_POLICIES.
	empty, _, err := engine.Encode(engine.Bundle{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, empty)
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	if res := clienttest.Evaluate(t, l, read); res.Code != engine.CodeNoPolicies || l.Revision() == first {
		t.Fatalf("after the reload: got %+v (revision %s), want deny NO_POLICIES from a new revision", res, l.Revision())
	}
	second := l.Revision()

	// A corrupt bundle, then none at all: an error each time, and the last
	// good bundle keeps deciding.
	writeFile(t, path, empty[:len(empty)/2])
	if err := l.Reload(); !errors.Is(err, engine.ErrCorruptBundle) || !strings.Contains(err.Error(), path) {
		t.Errorf("Reload of a truncated bundle: got %v, want ErrCorruptBundle naming the file", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := l.Reload(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Reload of a missing bundle: got %v, want fs.ErrNotExist", err)
	}
	if res := clienttest.Evaluate(t, l, read); res.Code != engine.CodeNoPolicies || l.Revision() != second {
		t.Errorf("after failed reloads: got %+v (revision %s), want the last good bundle %s", res, l.Revision(), second)
	}
}

func TestNewLocalErrors(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "bundle.json")
	writeFile(t, corrupt, []byte(`{"schemaVersion":1,"policies":[],"frozenAgents":[],"revision":"sha256:00"}`))
	badManifest := filepath.Join(dir, "manifests")
	if err := os.Mkdir(badManifest, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(badManifest, "p.yaml"), []byte("apiVersion: toolgate.dev/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec: {rules: [{id: r, effect: maybe}]}\n"))
	for path, want := range map[string]string{
		filepath.Join(dir, "absent.json"): "no such file",
		corrupt:                           "does not match its content",
		badManifest:                       "p.yaml",
	} {
		if _, err := New(Options{BundlePath: path}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%s): got %v, want an error with %q", path, err, want)
		}
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, data)
}

// renameFile replaces to in one step, as a writer publishing a bundle
// should.
func renameFile(t testing.TB, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// An Evaluator has no ApprovalRequests: an ask rule's call is denied
// APPROVAL_UNAVAILABLE, exactly as a sidecar reading the same bundle from
// a file answers it, waiting or not.
func TestLocalAskIsDeniedAsTheSidecarDeniesIt(t *testing.T) {
	file := clienttest.BundleOf(t, clienttest.AskPolicy)
	sc := clienttest.StartSidecar(t, file, nil)
	c := clienttest.NewClient(t, client.Options{URL: sc.Unix})
	l := newLocal(t, file)
	for _, wait := range []time.Duration{0, time.Minute} {
		req := client.Request{ToolName: "pay", Kwargs: map[string]any{"amount": 5000}, Wait: wait}
		got, want := clienttest.Evaluate(t, l, req), clienttest.Evaluate(t, c, req)
		if got.Allowed() || got.Asked() || got.Code != approval.CodeUnavailable || got.MatchedRuleID != "pay-over-cap" || !sameDecision(got, want) {
			t.Errorf("wait %v: in process %+v, sidecar %+v; want both deny APPROVAL_UNAVAILABLE by pay-over-cap", wait, got, want)
		}
	}
}
