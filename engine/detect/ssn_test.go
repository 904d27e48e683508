package detect

import "testing"

// findSSN goes on four bytes after each dash (none of the three bytes
// after a dash can be a first dash): SSNs right after, inside and
// overlapping dates and runs of dashes must still agree with the reference.
func TestSSNAfterDates(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"x 123-12-123-45-6789 y",
		"2026-12-02 123-45-6789",
		"2026-12-123-45-6789",
		"123-45-678-12-3456 123-45-6789",
		"12-45-678-90-1234",
		"1-2-3-4-5-6-7-8-9 123--45-6789 123-45-6789",
		"2026-12-02T15:30:55Z 987-65-4320 2026-12-02-123-45-6789",
	} {
		agree(t, text, []Detector{USSSN})
		agree(t, text, allDetectors())
	}
}
