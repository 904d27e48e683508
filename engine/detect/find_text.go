package detect

import (
	"math/bits"
	"strings"
)

// keyNames are generic_api_key's names (keyNamesRE) spelled out, lower
// case (a name matches in any case), grouped by their last two letters
// for keyNameBefore.
var keyNames = [...]string{
	"api_key", "api-key", "apikey", "access_key", "access-key", "accesskey", "secret_key", "secret-key", "secretkey", // y: [:9]
	"secret",             // t: [9:10]
	"token",              // n: [10:11]
	"password", "passwd", // d: [11:]
}

// findGeneric: a key name, an optional quote, [:=] between optional
// blanks, an optional quote, then 16 or more value bytes; the finding is
// the value. It looks at each ':' and '=' and reads back for a name. A name holds neither, so the separators'
// order is the matches' order; the name must start at or after pos, as
// FindAll's next match must.
func findGeneric(t string, from, limit int) (start, end int) {
	i := from
	for i <= limit {
		s := nextSeparator(t, i)
		if s < 0 || s > limit {
			return -1, -1
		}
		i = s + 1
		// A name's last letter, a quote or a blank comes before the
		// separator; in JSON and logs most separators fail here.
		if s == 0 || class[t[s-1]]&cKeyEnd == 0 || !keyNameBefore(t, s, from) {
			continue
		}
		v := s + 1
		for v < len(t) && (t[v] == ' ' || t[v] == '\t') {
			v++
		}
		if v < len(t) && (t[v] == '"' || t[v] == '\'') {
			v++
		}
		if e := runEnd(t, v, cValue); e-v >= 16 {
			return v, e
		}
	}
	return -1, -1
}

// nextSeparator is the index of the first ':' or '=' at or after i, or
// -1. JSON and logs hold one every 20 bytes or so: testing 8 bytes at a
// time for either costs a fraction of a strings.IndexByte call per
// separator (BenchmarkDetector/generic_api_key).
func nextSeparator(t string, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	const colons, equals = ':' * ones, '=' * ones
	for ; i+16 <= len(t); i += 16 {
		b := t[i : i+16]
		v := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		w := uint64(b[8]) | uint64(b[9])<<8 | uint64(b[10])<<16 | uint64(b[11])<<24 |
			uint64(b[12])<<32 | uint64(b[13])<<40 | uint64(b[14])<<48 | uint64(b[15])<<56
		x, y, z, u := v^colons, v^equals, w^colons, w^equals
		if ((x-ones)&^x|(y-ones)&^y|(z-ones)&^z|(u-ones)&^u)&highs != 0 {
			break // in these 16: the 8-byte loop says where
		}
	}
	for ; i+8 <= len(t); i += 8 {
		b := t[i : i+8]
		v := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		x, y := v^colons, v^equals
		// The lowest byte flagged is the first ':' or '=' (a borrow only
		// flags bytes above a zero byte).
		if m := ((x-ones)&^x | (y-ones)&^y) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(t); i++ {
		if t[i] == ':' || t[i] == '=' {
			return i
		}
	}
	return -1
}

// keyNameBefore: a name of keyNames, starting at or after from, then an
// optional quote and blanks up to the separator at s.
func keyNameBefore(t string, s, from int) bool {
	e := s
	for e > from && (t[e-1] == ' ' || t[e-1] == '\t') {
		e--
	}
	if e > from && (t[e-1] == '"' || t[e-1] == '\'') {
		e--
	}
	if e == from {
		return false
	}
	if e-len("token") < from {
		return false
	}
	// Only the names ending in the two bytes before e.
	var names []string
	switch uint16(t[e-2]|0x20)<<8 | uint16(t[e-1]|0x20) {
	case 'e'<<8 | 'y':
		names = keyNames[:9]
	case 'e'<<8 | 't':
		names = keyNames[9:10]
	case 'e'<<8 | 'n':
		names = keyNames[10:11]
	case 'r'<<8 | 'd', 'w'<<8 | 'd':
		names = keyNames[11:]
	default:
		return false
	}
	for _, name := range names {
		if e-len(name) >= from && foldedEqual(t[e-len(name):e], name) {
			return true
		}
	}
	return false
}

// foldedEqual: s equals the lower-case ASCII name, letters in either case.
func foldedEqual(s, name string) bool {
	for i := 0; i < len(name); i++ {
		c, n := s[i], name[i]
		if c != n && (n < 'a' || n > 'z' || c != n-'a'+'A') {
			return false
		}
	}
	return true
}

// findEmail: \b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b.
// It looks at each '@': the match starts at the first word boundary in the
// local-part run before it (not before from), and the domain is worked out
// as regexp backtracks (domainEnd).
func findEmail(t string, i, limit int) (start, end int) {
	from := i
	for i < len(t) {
		k := strings.IndexByte(t[i:], '@')
		if k < 0 {
			return -1, -1
		}
		a := i + k
		i = a + 1
		r := runStart(t, a, from, cLocal)
		q := r
		for q < a && wordBefore(t, q) == wordAt(t, q) {
			q++
		}
		if q == a {
			continue
		}
		if q > limit {
			return -1, -1
		}
		if e := domainEnd(t, a+1); e >= 0 {
			return q, e
		}
	}
	return -1, -1
}

// domainEnd: [A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b at i, as
// regexp matches it: labels are whole runs, and the last label that can
// end the match wins (the star is greedy). A label can end it when it
// starts with two or more letters followed by a non-word byte: the end of
// the label then anything but '_', or a '-' inside it.
func domainEnd(t string, i int) int {
	le := runEnd(t, i, cLabel)
	if le == i {
		return -1
	}
	best := -1
	for le < len(t) && t[le] == '.' {
		ls := le + 1
		le = runEnd(t, ls, cLabel)
		if le == ls {
			break
		}
		m := runEnd(t, ls, cAlpha)
		if m-ls >= 2 && !wordAt(t, m) {
			best = m
		}
	}
	return best
}
