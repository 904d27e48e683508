package detect

import (
	"testing"
	"unicode/utf8"

	"github.com/wasilibs/go-re2"
)

// The patterns are valid RE2 (the engine's regex engine) as well as Go
// regexp (TestPatternsCompile), one by one and as one alternation.
func TestPatternsCompileWithRE2(t *testing.T) {
	t.Parallel()
	for d := Detector(0); d < numDetectors; d++ {
		if _, err := re2.Compile(Pattern(d)); err != nil {
			t.Errorf("%v: %v", d, err)
		}
	}
	if _, err := re2.Compile(combined()); err != nil {
		t.Errorf("combined: %v", err)
	}
}

// On valid UTF-8, RE2 finds the same candidates as Go's regexp for each
// pattern (the reference model uses Go's regexp).
func TestRE2AgreesWithRegexp(t *testing.T) {
	t.Parallel()
	for d := Detector(0); d < numDetectors; d++ {
		re := re2.MustCompile(Pattern(d))
		for _, c := range corpus {
			got := re.FindAllStringSubmatchIndex(c.text, -1)
			want := compiled[d].FindAllStringSubmatchIndex(c.text, -1)
			if len(got) != len(want) {
				if utf8.ValidString(c.text) {
					t.Errorf("%v on %q: RE2 %v, regexp %v", d, c.text, got, want)
				}
				continue
			}
			for i := range got {
				for k := range got[i] {
					if got[i][k] != want[i][k] {
						t.Errorf("%v on %q: RE2 %v, regexp %v", d, c.text, got, want)
					}
				}
			}
		}
	}
}
