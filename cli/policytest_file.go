package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/manifest"
)

// The test file's identity: fixed, so that test files written today keep
// working.
const (
	testAPIVersion = "cli.toolgate.dev/v1alpha1"
	testKind       = "Test"
	// testFileSuffix names the files a directory PATH is searched for
	// (and that manifest directories skip).
	testFileSuffix = manifest.TestFileSuffix
)

// testFile is one `toolgate test` file: the manifests a namespace's bundle
// is built from, the namespace and its labels, the clock, the usage
// history, and the cases.
type testFile struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	// Manifests are files or directories, relative to the test file.
	Manifests []string `json:"manifests"`
	// Namespace is the namespace the bundle is built for.
	Namespace string `json:"namespace,omitempty"`
	// NamespaceLabels are the Namespace's labels, as the operator reads
	// them (toolgate.dev/environment, toolgate.dev/enforce).
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`
	// Now is the clock, RFC 3339; empty is the real one.
	Now string `json:"now,omitempty"`
	// History is a usage history file, as `toolgate eval --history`,
	// relative to the test file.
	History string     `json:"history,omitempty"`
	Cases   []testCase `json:"cases"`
}

// testCase is one request and the result fields it must give.
type testCase struct {
	Name string `json:"name"`
	// Request is the /v1/evaluate JSON. One carrying output is a tool's
	// result, judged by result rules only, as /v1/evaluate judges it.
	Request json.RawMessage `json:"request"`
	// Expect is any subset of the result's fields.
	Expect map[string]json.RawMessage `json:"expect"`
	// ServiceAccount is the one the sidecar runs as (optional): freezes
	// and exceptions naming it apply.
	ServiceAccount string `json:"serviceAccount,omitempty"`
}

// resultFields are the fields of a decision a case may expect: what the
// sidecar's answer (engine.Result.AppendJSON) writes, but the latency. The
// last three are a result's (a request carrying output): the spans
// redacted, the output as delivered, and each result rule's explanation.
var resultFields = []string{
	"decision", "effect", "matchedPolicyId", "matchedPolicyVersion", "matchedRuleId", "matchedPolicyKind",
	"matchedResource", "code", "reason", "warnings", "exceptionApplied", "shadow",
	"redactions", "output", "explanations",
}

// loadedTest is a test file read and checked: its cases' requests decoded
// as the sidecar decodes them.
type loadedTest struct {
	path     string
	file     testFile
	now      time.Time
	requests []engine.Request
}

// testInputError is input a test cannot run on: exit 2.
type testInputError struct{ msg string }

func (e *testInputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &testInputError{msg: fmt.Sprintf(format, args...)}
}

// findTestFiles lists the test files PATHs name: a file as it is, a
// directory searched for *toolgate-test.yaml, sorted.
func findTestFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, inputErrorf("%s: cannot read: %v", p, unwrapPathError(err))
		}
		if !info.IsDir() {
			out = append(out, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && manifest.IsTestFile(path) {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, inputErrorf("%s: %v", p, err)
		}
		if len(found) == 0 {
			return nil, inputErrorf("%s: no *%s file in this directory or below", p, testFileSuffix)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readTestFile reads and checks one test file; every error names the file
// and the field.
func readTestFile(path string) (*loadedTest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, inputErrorf("%s: cannot read: %v", path, unwrapPathError(err))
	}
	docs, err := manifest.Documents(path, data)
	if err != nil {
		return nil, inputErrorf("%v", err)
	}
	if len(docs) != 1 {
		return nil, inputErrorf("%s: %d documents: one Test per file", path, len(docs))
	}
	dec := json.NewDecoder(bytes.NewReader(docs[0]))
	dec.DisallowUnknownFields()
	t := &loadedTest{path: path}
	if err := dec.Decode(&t.file); err != nil {
		return nil, inputErrorf("%s: %s", path, describeDecodeError(err))
	}
	if err := t.check(); err != nil {
		return nil, inputErrorf("%s: %v", path, err)
	}
	return t, nil
}

// describeDecodeError words encoding/json's errors for a test file.
func describeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: want %s, not a %s", te.Field, te.Type, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func (t *loadedTest) check() error {
	f := &t.file
	switch {
	case f.APIVersion != testAPIVersion:
		return fmt.Errorf("apiVersion: %q, want %s", f.APIVersion, testAPIVersion)
	case f.Kind != testKind:
		return fmt.Errorf("kind: %q, want %s", f.Kind, testKind)
	case len(f.Manifests) == 0:
		return errors.New("manifests: name at least one file or directory of Policies and FrozenAgents")
	case len(f.Cases) == 0:
		return errors.New("cases: none")
	}
	for i, m := range f.Manifests {
		if m == "" || m == "-" {
			return fmt.Errorf("manifests[%d]: %q is not a file or directory", i, m)
		}
	}
	if f.Namespace == "" {
		f.Namespace = "default"
	}
	t.now = time.Now()
	if f.Now != "" {
		now, err := time.Parse(time.RFC3339Nano, f.Now)
		if err != nil {
			return fmt.Errorf("now: %q is not an RFC 3339 time (like 2030-01-31T17:00:00Z)", f.Now)
		}
		t.now = now
	}
	seen := map[string]int{}
	for i, c := range f.Cases {
		at := fmt.Sprintf("cases[%d]", i)
		if c.Name == "" {
			return fmt.Errorf("%s.name: required", at)
		}
		if j, dup := seen[c.Name]; dup {
			return fmt.Errorf("%s.name: %q is also cases[%d]'s", at, c.Name, j)
		}
		seen[c.Name] = i
		if len(c.Request) == 0 {
			return fmt.Errorf("%s (%s).request: required", at, c.Name)
		}
		req, err := engine.DecodeRequest(c.Request)
		if err != nil {
			return fmt.Errorf("%s (%s).request: %v", at, c.Name, err)
		}
		if c.ServiceAccount != "" {
			if msgs := validation.IsDNS1123Subdomain(c.ServiceAccount); len(msgs) > 0 {
				return fmt.Errorf("%s (%s).serviceAccount: %q is not a ServiceAccount name: %s", at, c.Name, c.ServiceAccount, strings.Join(msgs, "; "))
			}
		}
		t.requests = append(t.requests, req)
		if len(c.Expect) == 0 {
			return fmt.Errorf("%s (%s).expect: name at least one result field (%s)", at, c.Name, strings.Join(resultFields, ", "))
		}
		for k := range c.Expect {
			if !slices.Contains(resultFields, k) {
				return fmt.Errorf("%s (%s).expect.%s: not a result field (want %s)", at, c.Name, k, strings.Join(resultFields, ", "))
			}
		}
	}
	return nil
}

// rel is p relative to the test file's directory, unless absolute.
func (t *loadedTest) rel(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(t.path), p)
}
