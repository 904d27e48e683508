// Package regex compiles the policy language's `matches` patterns: RE2
// syntax, checked by Go's parser first, with plain literals (contains,
// prefix, suffix, exact) tested without calling into RE2, and the spans
// of their matches for result rules' redactions and explanations.
package regex

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"github.com/wasilibs/go-re2"
)

// MaxLength bounds a `matches` pattern; RE2's own memory limit bounds
// what it compiles to.
const MaxLength = 4096

// literalKind says when a pattern is a plain string test: for short inputs
// the call into RE2 costs more than the whole match.
type literalKind uint8

const (
	notLiteral literalKind = iota
	litContains
	litPrefix
	litSuffix
	litExact
)

// Matcher is one compiled pattern.
type Matcher struct {
	re   *re2.Regexp
	kind literalKind
	lit  string
}

// Match tells whether s holds a match of m.
func (m *Matcher) Match(s string) bool {
	switch m.kind {
	case litContains:
		return strings.Contains(s, m.lit)
	case litPrefix:
		return strings.HasPrefix(s, m.lit)
	case litSuffix:
		return strings.HasSuffix(s, m.lit)
	case litExact:
		return s == m.lit
	}
	return m.re.MatchString(s)
}

// Compile compiles pattern as RE2 would, refusing what RE2 refuses and
// patterns longer than MaxLength.
func Compile(pattern string) (*Matcher, error) {
	if len(pattern) > MaxLength {
		return nil, fmt.Errorf("pattern is %d bytes long, more than %d", len(pattern), MaxLength)
	}
	// Go's parser rejects what RE2 rejects (lookaround, backreferences) with
	// the same messages, and unlike RE2's wasm build it does not log to
	// stderr, so invalid patterns never reach RE2.
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		// Go's parser knows every RE2 construct but \C (any byte). With
		// each \C made "any character" the rest of the pattern gets the
		// same check, and RE2, which accepts \C, compiles the original.
		probe, hasAnyByte := anyByteAsAnyChar(pattern)
		if !hasAnyByte {
			return nil, err
		}
		if _, perr := syntax.Parse(probe, syntax.Perl); perr != nil {
			return nil, err
		}
		m := &Matcher{}
		if m.re, err = re2.Compile(pattern); err != nil {
			return nil, err
		}
		return m, nil
	}
	m := &Matcher{}
	if m.kind, m.lit = literalForm(parsed.Simplify()); m.kind != notLiteral {
		return m, nil // a plain literal is valid in RE2 by construction
	}
	if m.re, err = re2.Compile(pattern); err != nil { // RE2 is the authority on what compiles
		return nil, err
	}
	return m, nil
}

func literalForm(re *syntax.Regexp) (literalKind, string) {
	lit := func(r *syntax.Regexp) (string, bool) {
		if r.Op != syntax.OpLiteral || r.Flags&syntax.FoldCase != 0 {
			return "", false
		}
		s := string(r.Rune)
		// RE2 and Go disagree with byte search about invalid UTF-8 against
		// U+FFFD; leave such patterns to RE2.
		return s, !strings.ContainsRune(s, utf8.RuneError)
	}
	if s, ok := lit(re); ok {
		return litContains, s
	}
	if re.Op != syntax.OpConcat {
		return notLiteral, ""
	}
	subs := re.Sub
	begin := len(subs) > 0 && subs[0].Op == syntax.OpBeginText
	end := len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText
	switch {
	case begin && end && len(subs) == 3:
		if s, ok := lit(subs[1]); ok {
			return litExact, s
		}
	case begin && len(subs) == 2:
		if s, ok := lit(subs[1]); ok {
			return litPrefix, s
		}
	case end && len(subs) == 2:
		if s, ok := lit(subs[0]); ok {
			return litSuffix, s
		}
	}
	return notLiteral, ""
}

// anyByteAsAnyChar replaces each \C outside character classes and \Q...\E
// quotes with (?s:.), and says whether there was one. Inside a class \C is
// an error for both parsers, so it is left for Go's to reject.
func anyByteAsAnyChar(p string) (string, bool) {
	var b strings.Builder
	found, inClass := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p) && p[i+1] == 'Q' && !inClass:
			end := strings.Index(p[i+2:], `\E`)
			if end < 0 {
				b.WriteString(p[i:])
				return b.String(), found
			}
			b.WriteString(p[i : i+2+end+2])
			i += 2 + end + 1
		case c == '\\' && i+1 < len(p):
			if p[i+1] == 'C' && !inClass {
				b.WriteString("(?s:.)")
				found = true
			} else {
				b.WriteString(p[i : i+2])
			}
			i++
		case c == '[' && inClass && strings.HasPrefix(p[i:], "[:"):
			if end := strings.Index(p[i+2:], ":]"); end >= 0 {
				b.WriteString(p[i : i+2+end+2])
				i += 2 + end + 1
			} else {
				b.WriteByte(c)
			}
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			// A ']' first in the class (after an optional '^') is literal.
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				b.WriteByte(']')
				i++
			}
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), found
}

// Spans calls yield with each non-empty match of m in s, left to right,
// not overlapping: every one (all), or the first. A callback rather than
// a slice, so that the caller appends straight into its own spans.
func (m *Matcher) Spans(s string, all bool, yield func(start, end int)) {
	found := false
	add := func(start, end int) {
		if end > start {
			found = true
			yield(start, end)
		}
	}
	switch m.kind {
	case litContains:
		n := 1
		if all {
			n = -1
		}
		for off, count := 0, 0; count != n; count++ {
			i := strings.Index(s[off:], m.lit)
			if i < 0 || m.lit == "" {
				break
			}
			add(off+i, off+i+len(m.lit))
			off += i + len(m.lit)
		}
	case litPrefix:
		if strings.HasPrefix(s, m.lit) {
			add(0, len(m.lit))
		}
	case litSuffix:
		if strings.HasSuffix(s, m.lit) {
			add(len(s)-len(m.lit), len(s))
		}
	case litExact:
		if s == m.lit {
			add(0, len(s))
		}
	default:
		n := 1
		if all {
			n = -1
		}
		for _, loc := range m.re.FindAllStringIndex(s, n) {
			add(loc[0], loc[1])
		}
		if !all && !found { // the first match was empty: find a non-empty one
			for _, loc := range m.re.FindAllStringIndex(s, -1) {
				if add(loc[0], loc[1]); found {
					break
				}
			}
		}
	}
}
