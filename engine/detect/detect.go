// Package detect finds secrets and personal data in text: the built-in
// detectors of the `detect` condition operator (issue 28). It is pure (no
// I/O) and the engine's only dependency for them.
//
// CONTRACT (filled in by the detect work; the signatures are what the
// engine codes against): a Scanner is compiled once per condition for the
// set of detectors it names and scans a field in one pass; First allocates
// nothing; AppendAll reports every match left to right, never overlapping.
package detect

import "fmt"

// Detector is one built-in detector.
type Detector uint8

// The built-in detectors, in the order Names lists them.
const (
	AWSAccessKey Detector = iota
	PrivateKey
	JWT
	GitHubToken
	SlackToken
	GenericAPIKey
	CreditCard
	Email
	IBAN
	USSSN
	numDetectors
)

var names = [numDetectors]string{
	"aws_access_key", "private_key", "jwt", "github_token", "slack_token",
	"generic_api_key", "credit_card", "email", "iban", "us_ssn",
}

// String is the detector's name as a condition names it.
func (d Detector) String() string {
	if d < numDetectors {
		return names[d]
	}
	return fmt.Sprintf("detector(%d)", d)
}

// Names are the names of every built-in detector.
func Names() []string { return append([]string(nil), names[:]...) }

// Lookup finds a detector by name.
func Lookup(name string) (Detector, bool) {
	for i, n := range names {
		if n == name {
			return Detector(i), true
		}
	}
	return 0, false
}

// Match is one finding: the bytes [Start, End) of the text, and which
// detector found them.
type Match struct {
	Start, End int
	Detector   Detector
}

// Scanner scans for a fixed set of detectors.
type Scanner struct {
	set uint16
}

// New compiles a scanner for the named detectors; an unknown or repeated
// name is an error naming the known ones.
func New(detectorNames ...string) (*Scanner, error) {
	if len(detectorNames) == 0 {
		return nil, fmt.Errorf("detect needs at least one detector (one of %v)", names)
	}
	s := &Scanner{}
	for _, n := range detectorNames {
		d, ok := Lookup(n)
		if !ok {
			return nil, fmt.Errorf("unknown detector %q: known detectors are %v", n, names)
		}
		s.set |= 1 << d
	}
	return s, nil
}

// First is the leftmost match in text, false when there is none.
func (s *Scanner) First(text string) (Match, bool) {
	return Match{}, false // CONTRACT: implemented by the detect work
}

// AppendAll appends every match in text to dst, left to right, none
// overlapping another.
func (s *Scanner) AppendAll(dst []Match, text string) []Match {
	return dst // CONTRACT: implemented by the detect work
}

// Pattern is an RE2 pattern that matches what d finds before its checks
// (Check): what the Rego export compiles.
func Pattern(d Detector) string { return "" } // CONTRACT

// Check is d's check of a candidate Pattern matched (the Luhn check of a
// credit card number, an IBAN's mod-97); true for detectors without one.
func Check(d Detector, candidate string) bool { return true } // CONTRACT
