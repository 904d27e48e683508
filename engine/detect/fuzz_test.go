package detect

import (
	"strings"
	"testing"
)

// FuzzScanner holds the scanner to the reference model (Go's regexp over
// Pattern, then Check; reference_test.go), for all detectors and for each
// alone: the same matches, First is AppendAll's first, spans in range and
// ordered, and no input panics.
func FuzzScanner(f *testing.F) {
	for _, c := range corpus {
		f.Add(c.text)
	}
	for _, a := range adversarial {
		f.Add(repeatTo(a.unit, 200))
	}
	f.Add("")
	f.Add("\xff\xfe@\x80.com 4111\xe2\x80\x831111 1111 1111")
	f.Add(strings.Repeat("eyJ-", 50) + "." + strings.Repeat("x", 40))
	f.Fuzz(func(t *testing.T, text string) {
		agree(t, text, allDetectors())
		for d := Detector(0); d < numDetectors; d++ {
			agree(t, text, []Detector{d})
		}
	})
}
