package detect

import (
	"strings"
	"testing"
)

func TestDetectors(t *testing.T) {
	t.Parallel()
	s := scannerFor(t, allDetectors())
	for _, c := range corpus {
		got := s.AppendAll(nil, c.text)
		var want []Match
		for _, w := range c.want {
			if c.text[w.start:w.start+len(w.text)] != w.text {
				t.Fatalf("%s: bad test: %q is not at %d", c.name, w.text, w.start)
			}
			want = append(want, Match{Start: w.start, End: w.start + len(w.text), Detector: w.detector})
		}
		if !sameMatches(got, want) {
			t.Errorf("%s: %q:\n got  %v\n want %v", c.name, c.text, got, want)
		}
		first, ok := s.First(c.text)
		if ok != (len(want) > 0) || ok && first != want[0] {
			t.Errorf("%s: First %v %v, want %v", c.name, first, ok, want)
		}
	}
}

// Each detector alone finds its own examples in the corpus, and the
// scanner of every detector agrees with Pattern+Check (reference_test.go)
// on every text.
func TestPatternAgreesWithScanner(t *testing.T) {
	t.Parallel()
	for _, c := range corpus {
		agree(t, c.text, allDetectors())
		for d := Detector(0); d < numDetectors; d++ {
			agree(t, c.text, []Detector{d})
		}
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, "at least one detector"},
		{[]string{""}, "empty detector name"},
		{[]string{"aws"}, `unknown detector "aws": known detectors are aws_access_key, private_key`},
		{[]string{"email", "Email"}, `unknown detector "Email"`},
		{[]string{"email", "jwt", "email"}, `detector "email" is named twice`},
	} {
		s, err := New(tc.names...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q) = %v, %v; want an error with %q", tc.names, s, err, tc.want)
		}
	}
	s, err := New(Names()...)
	if err != nil || len(s.Detectors()) != len(Names()) {
		t.Fatalf("New(all) = %v, %v", s, err)
	}
}

func TestNamesAndLookup(t *testing.T) {
	t.Parallel()
	for i, n := range Names() {
		d, ok := Lookup(n)
		if !ok || int(d) != i || d.String() != n {
			t.Errorf("Lookup(%q) = %v, %v", n, d, ok)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) found a detector")
	}
	if got := Detector(200).String(); got != "detector(200)" {
		t.Errorf("String of an unknown detector: %q", got)
	}
	if Pattern(Detector(200)) != "" {
		t.Error("an unknown detector has a pattern")
	}
}

func TestChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    Detector
		in   string
		want bool
	}{
		{CreditCard, "4111111111111111", true},
		{CreditCard, "4111-1111-1111-1111", true},
		{CreditCard, "4111111111111112", false},     // Luhn
		{CreditCard, "79927398713", false},          // Luhn holds, too short
		{CreditCard, "9999999999999995", false},     // Luhn holds, no issuer
		{CreditCard, "2720990000000007", true},      // last Mastercard 2-series
		{CreditCard, "2721000000000006", false},     // past it
		{CreditCard, "6440000000000005", true},      // Discover 644
		{CreditCard, "41111111111111111111", false}, // 20 digits
		{CreditCard, "4111x111111111111", false},
		{IBAN, "GB82WEST12345698765432", true},
		{IBAN, "GB82 WEST 1234 5698 7654 32", true},
		{IBAN, "GB83WEST12345698765432", false},
		{IBAN, "FR1420041010050500013M02606", true},
		{IBAN, "NO9386011117947", true}, // the shortest country
		{IBAN, "gb82west12345698765432", false},
		{IBAN, "GB82", false},
		{USSSN, "123-45-6789", true},
		{USSSN, "899-45-6789", true},
		{USSSN, "900-45-6789", false},
		{USSSN, "123-45-678", false},
		{Email, "anything", true},
	} {
		if got := Check(tc.d, tc.in); got != tc.want {
			t.Errorf("Check(%v, %q) = %v, want %v", tc.d, tc.in, got, tc.want)
		}
	}
}

// Every pattern compiles with Go's regexp (the test's reference) and with
// RE2 (re2_test.go).
func TestPatternsCompile(t *testing.T) {
	t.Parallel()
	for d := Detector(0); d < numDetectors; d++ {
		if compiled[d] == nil || compiled[d].NumSubexp() > 1 {
			t.Errorf("%v: %q", d, Pattern(d))
		}
	}
}
