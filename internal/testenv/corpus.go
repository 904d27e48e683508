package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// CorpusCase is one manifest of cli/testdata/validate-corpus: one object and,
// on its first line, what the API server does with it:
//
//	# expect: accepted
//	# expect: rejected FIELD...
//
// FIELD... is every field the rejection names (none when the API server's
// message names no field path).
type CorpusCase struct {
	Name   string
	Path   string
	Doc    []byte
	Accept bool
	Fields []string
}

// minCorpus keeps the corpus from shrinking to nothing unnoticed.
const minCorpus = 25

// ValidateCorpus reads the corpus `toolgate validate` and the API server are
// held to, failing t on a file without a well-formed expectation.
func ValidateCorpus(t testing.TB) []CorpusCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(RepoRoot(), "cli", "testdata", "validate-corpus", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < minCorpus {
		t.Fatalf("validate corpus: %d cases, want at least %d", len(paths), minCorpus)
	}
	var out []CorpusCase
	for _, p := range paths {
		doc, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(doc), "\n")
		words := strings.Fields(strings.TrimPrefix(first, "# expect:"))
		c := CorpusCase{Name: strings.TrimSuffix(filepath.Base(p), ".yaml"), Path: p, Doc: doc}
		switch {
		case !strings.HasPrefix(first, "# expect:") || len(words) == 0:
			t.Fatalf("%s: first line %q, want \"# expect: accepted\" or \"# expect: rejected FIELD...\"", p, first)
		case words[0] == "accepted" && len(words) == 1:
			c.Accept = true
		case words[0] == "rejected":
			c.Fields = Fields(words[1:])
		default:
			t.Fatalf("%s: cannot read the expectation %q", p, first)
		}
		out = append(out, c)
	}
	return out
}

// problemField is the FIELD of a `toolgate validate` line
// (FILE:doc N: Kind/name: FIELD: message): a path from one of the object's
// top-level fields, without spaces or colons. A line without one is about
// the whole object.
var problemField = regexp.MustCompile(`^(?:apiVersion|kind|metadata|spec|status)(?:[.\[][^\s:]*)?$`)

// ProblemFields returns, sorted and once each, the fields the problem lines
// `toolgate validate` printed for file name.
func ProblemFields(t testing.TB, stdout, file string) []string {
	t.Helper()
	var fields []string
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		if line == "" {
			continue
		}
		rest, ok := strings.CutPrefix(line, file+":doc 1: ")
		if !ok {
			t.Fatalf("problem line not about %s doc 1: %q", file, line)
		}
		_, rest, _ = strings.Cut(rest, ": ") // Kind/name
		if f, _, _ := strings.Cut(rest, ": "); problemField.MatchString(f) {
			fields = append(fields, f)
		}
	}
	return Fields(fields)
}

// Fields sorts field paths and drops repeats, so sets compare with
// slices.Equal.
func Fields(fs []string) []string {
	out := slices.Clone(fs)
	slices.Sort(out)
	return slices.Compact(out)
}
