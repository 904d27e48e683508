package detect

import (
	"fmt"
	"strings"
)

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

// Scanner scans for a fixed set of detectors. It holds no state between
// calls: one Scanner serves any number of goroutines.
type Scanner struct {
	set uint16
}

// New compiles a scanner for the named detectors; an empty list, an empty,
// unknown or repeated name is an error naming the known ones.
func New(detectorNames ...string) (*Scanner, error) {
	if len(detectorNames) == 0 {
		return nil, fmt.Errorf("detect needs at least one detector (one of %s)", known())
	}
	s := &Scanner{}
	for _, n := range detectorNames {
		if n == "" {
			return nil, fmt.Errorf("empty detector name: known detectors are %s", known())
		}
		d, ok := Lookup(n)
		if !ok {
			return nil, fmt.Errorf("unknown detector %q: known detectors are %s", n, known())
		}
		if s.set&(1<<d) != 0 {
			return nil, fmt.Errorf("detector %q is named twice", n)
		}
		s.set |= 1 << d
	}
	return s, nil
}

func known() string { return strings.Join(names[:], ", ") }

// Detectors are the scanner's detectors, in the order Names lists them.
func (s *Scanner) Detectors() []Detector {
	var out []Detector
	for d := Detector(0); d < numDetectors; d++ {
		if s.has(d) {
			out = append(out, d)
		}
	}
	return out
}

func (s *Scanner) has(d Detector) bool { return s.set&(1<<d) != 0 }

// First is the leftmost match in text, false when there is none: the first
// match AppendAll would report. It allocates nothing.
func (s *Scanner) First(text string) (Match, bool) {
	best, found := Match{}, false
	iban := noRunFinding
	for d := Detector(0); d < numDetectors; d++ {
		if !s.has(d) {
			continue
		}
		limit := len(text)
		if found {
			limit = best.Start
		}
		c := newCursor()
		start, end := s.findFirst(d, text, &c, limit, &iban)
		if start < 0 || start > limit {
			continue
		}
		m := Match{Start: start, End: end, Detector: d}
		if !found || m.before(best) {
			best, found = m, true
		}
	}
	return best, found
}

// before orders matches as AppendAll reports them: leftmost, then longest,
// then the detector listed first (the caller tries detectors in that order,
// so a tie keeps the earlier one).
func (m Match) before(o Match) bool {
	return m.Start < o.Start || m.Start == o.Start && m.End > o.End
}

// AppendAll appends every match in text to dst, left to right, none
// overlapping another: each detector's findings (Pattern) in order of
// start, the longer first at the same start, then the detector listed
// first, a finding that overlaps one already reported being dropped. It
// allocates only to grow dst.
func (s *Scanner) AppendAll(dst []Match, text string) []Match {
	var (
		cur  [numDetectors]cursor
		next [numDetectors]Match
		live uint16
		iban = noRunFinding
	)
	for d := Detector(0); d < numDetectors; d++ {
		if s.has(d) {
			cur[d] = newCursor()
			if start, end := s.findFirst(d, text, &cur[d], len(text), &iban); start >= 0 {
				next[d] = Match{Start: start, End: end, Detector: d}
				live |= 1 << d
			}
		}
	}
	reported := 0
	for live != 0 {
		var m Match
		first := true
		for d := Detector(0); d < numDetectors; d++ {
			if live&(1<<d) != 0 && (first || next[d].before(m)) {
				m, first = next[d], false
			}
		}
		if m.Start >= reported {
			dst = append(dst, m)
			reported = m.End
		}
		d := m.Detector
		if start, end := find(d, text, &cur[d], len(text)); start >= 0 {
			next[d] = Match{Start: start, End: end, Detector: d}
		} else {
			live &^= 1 << d
		}
	}
	return dst
}

// findFirst is find for d's first finding, except that when the scanner
// has both credit_card and iban, credit_card's turn finds both in one
// pass over the digits (findRuns) and keeps iban's in *iban for its turn.
func (s *Scanner) findFirst(d Detector, text string, c *cursor, limit int, iban *runFinding) (start, end int) {
	const pair = 1<<CreditCard | 1<<IBAN
	if s.set&pair != pair || d != CreditCard && d != IBAN {
		return find(d, text, c, limit)
	}
	f := *iban
	if d == CreditCard {
		f, *iban = findRuns(text, c.pos, limit, cCard|cIBANRun)
	}
	if f.start >= 0 {
		c.pos = f.end
	} else {
		c.pos = len(text)
	}
	return f.start, f.end
}
