package detect

import (
	"regexp"
	"sort"
	"testing"
)

// compiled are the detectors' patterns compiled by Go's regexp, the
// engine the Rego export's regex builtins use.
var compiled = func() (out [numDetectors]*regexp.Regexp) {
	for d := Detector(0); d < numDetectors; d++ {
		out[d] = regexp.MustCompile(Pattern(d))
	}
	return out
}()

// reference is what the package comment says a scanner finds, computed
// the slow way: each detector's FindAll matches of Pattern that pass
// Check (the span being the first group when there is one), then left to
// right, longest first at the same start, then the detector listed first,
// dropping what overlaps a match already kept.
func reference(text string, ds []Detector) []Match {
	var all []Match
	for _, d := range ds {
		for _, loc := range compiled[d].FindAllStringSubmatchIndex(text, -1) {
			span := loc[0:2]
			if len(loc) > 2 {
				span = loc[2:4]
			}
			if Check(d, text[span[0]:span[1]]) {
				all = append(all, Match{Start: span[0], End: span[1], Detector: d})
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if a.End != b.End {
			return a.End > b.End
		}
		return a.Detector < b.Detector
	})
	var out []Match
	reported := 0
	for _, m := range all {
		if m.Start >= reported {
			out = append(out, m)
			reported = m.End
		}
	}
	return out
}

func allDetectors() []Detector {
	var ds []Detector
	for d := Detector(0); d < numDetectors; d++ {
		ds = append(ds, d)
	}
	return ds
}

func scannerFor(t testing.TB, ds []Detector) *Scanner {
	t.Helper()
	var ns []string
	for _, d := range ds {
		ns = append(ns, d.String())
	}
	s, err := New(ns...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// agree checks the scanner against reference on text, for ds, and First
// against AppendAll; it reports each difference.
func agree(t testing.TB, text string, ds []Detector) {
	t.Helper()
	s := scannerFor(t, ds)
	got := s.AppendAll(nil, text)
	want := reference(text, ds)
	if !sameMatches(got, want) {
		t.Errorf("%v on %q:\n scanner   %v\n reference %v", ds, text, got, want)
	}
	first, ok := s.First(text)
	if ok != (len(got) > 0) || ok && first != got[0] {
		t.Errorf("%v on %q: First %v %v, AppendAll %v", ds, text, first, ok, got)
	}
	for i, m := range got {
		if m.Start < 0 || m.End > len(text) || m.Start >= m.End || i > 0 && m.Start < got[i-1].End {
			t.Errorf("%v on %q: match %d %v out of range or order (%v)", ds, text, i, m, got)
		}
	}
}

func sameMatches(a, b []Match) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
