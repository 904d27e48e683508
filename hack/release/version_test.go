package main

import (
	"strings"
	"testing"
)

func TestParseTagRefusesWhatIsNotVXYZ(t *testing.T) {
	for tag, want := range map[string]string{"v0.1.0": "0.1.0", "v1.22.333": "1.22.333", "v0.0.0-test": "0.0.0-test", "v1.0.0-rc.1": "1.0.0-rc.1"} {
		if got, err := parseTag(tag); err != nil || got != want {
			t.Errorf("parseTag(%q) = %q, %v; want %q", tag, got, err, want)
		}
	}
	for _, tag := range []string{"", "0.1.0", "v0.1", "v01.0.0", "v0.1.0+build", "v0.1.0-", "v0.1.0-a..b", "V0.1.0", "v0.1.0 ", "dev", "v0.1.0-bad/label"} {
		if _, err := parseTag(tag); err == nil || !strings.Contains(err.Error(), "vX.Y.Z") {
			t.Errorf("parseTag(%q): %v, want an error naming vX.Y.Z", tag, err)
		}
	}
}

func TestPEP440(t *testing.T) {
	for in, want := range map[string]string{"0.1.0": "0.1.0", "1.0.0-rc.1": "1.0.0rc1", "1.0.0-beta2": "1.0.0b2", "1.0.0-alpha.3": "1.0.0a3", "0.0.0-test": "0.0.0+test", "0.0.0-test-x.1": "0.0.0+test.x.1"} {
		if got := pep440(in); got != want {
			t.Errorf("pep440(%q) = %q, want %q", in, got, want)
		}
	}
}
