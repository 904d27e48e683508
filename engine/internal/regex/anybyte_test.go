package regex

import (
	"testing"
	"unicode/utf8"

	"github.com/wasilibs/go-re2"
)

// \C (any byte) is RE2 syntax Go's parser lacks: the engine accepts it
// where RE2 does, and matches as RE2 does.
func TestAnyByteEscape(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		matches map[string]bool
	}{
		{`a\Cb`, map[string]bool{"axb": true, "ab": false, "aéb": false}},
		{`^\C\C$`, map[string]bool{"é": true, "ab": true, "a": false}},
		{`(?i)token=\C+`, map[string]bool{"TOKEN=x": true, "token=": false}},
		{`\\C`, map[string]bool{`\C`: true, "C": false}}, // an escaped backslash, then C
	} {
		m, err := Compile(tc.pattern)
		if err != nil {
			t.Errorf("%s: %v", tc.pattern, err)
			continue
		}
		for s, want := range tc.matches {
			if got := m.Match(s); got != want {
				t.Errorf("%s on %q: %v, want %v", tc.pattern, s, got, want)
			}
		}
	}
}

// The engine accepts a pattern exactly when RE2 does, \C or not.
func TestPatternValidityAgreesWithRE2(t *testing.T) {
	for _, p := range []string{
		`\C`, `a\C*b`, `[\C]`, `[^\C]`, `\C(?=x)`, `(\C`, `\C\1`, `\Q\C\E`, `\Q\C\E\C`, `[]\C]`, `[[:alpha:]]\C`,
		`[[:alpha:]\C]`, `\C{2,1}`, `\C{1001}`, `x\`, `\Cx\`, `(?P<n>\C)`, `\pN\C`, `\C|\z`, `\Z\C`,
	} {
		_, engineErr := Compile(p)
		_, re2Err := re2.Compile(p)
		if (engineErr == nil) != (re2Err == nil) {
			t.Errorf("%s: engine %v, RE2 %v", p, engineErr, re2Err)
		}
	}
}

func TestAnyByteAsAnyChar(t *testing.T) {
	for in, want := range map[string]string{
		`a\Cb`:      `a(?s:.)b`,
		`\\C`:       `\\C`,
		`[\C]\C`:    `[\C](?s:.)`,
		`[]\C]\C`:   `[]\C](?s:.)`,
		`[^]\C]\C`:  `[^]\C](?s:.)`,
		`\Q\C\E\C`:  `\Q\C\E(?s:.)`,
		`\Q\C`:      `\Q\C`,
		`[[:a:]\C]`: `[[:a:]\C]`,
	} {
		if got, _ := anyByteAsAnyChar(in); got != want {
			t.Errorf("anyByteAsAnyChar(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzPatternAgreesWithRE2: RE2 is the authority on what compiles; the
// engine's own checks (Go's parser first, to keep RE2's stderr quiet) must
// neither add nor lose a pattern. RE2 logs every pattern it rejects, so
// fuzzing this prints noise on stderr.
func FuzzPatternAgreesWithRE2(f *testing.F) {
	for _, s := range []string{`\C`, `a\C*b`, `[\C]`, `\Q\C\E`, `(?i)x+`, `(?=x)`, `\1`, `[[:alpha:]]`, `\pL`, `(?P<n>a)`, `a{2,1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		// Patterns reach the engine through JSON, which carries only valid
		// UTF-8 (RE2 would take an encoded surrogate; Go's parser does not).
		if len(p) > 64 || !utf8.ValidString(p) {
			return
		}
		_, engineErr := Compile(p)
		_, re2Err := re2.Compile(p)
		if (engineErr == nil) != (re2Err == nil) {
			t.Fatalf("%q: engine %v, RE2 %v", p, engineErr, re2Err)
		}
	})
}
