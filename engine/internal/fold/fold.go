// Package fold gives agent ids their canonical form under Unicode simple
// folding, so that freezes, exceptions and limits find an agent with one
// map lookup and agree with strings.EqualFold.
package fold

import (
	"unicode"
	"unicode/utf8"
)

// Key maps s to a canonical string such that Key(a) == Key(b)
// exactly when strings.EqualFold(a, b): every rune becomes one fixed member of
// its simple-folding orbit (the lower-case one where there is one). This lets
// frozen agents be found with one map lookup instead of a scan.
func Key(s string) string {
	if k, ok := ASCIIKey(s); ok {
		return k
	}
	buf := make([]byte, 0, len(s))
	return string(AppendKey(buf, s))
}

// ASCIIKey is the allocation-free common case: ASCII without upper case
// is its own key.
func ASCIIKey(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || (c >= 'A' && c <= 'Z') {
			return "", false
		}
	}
	return s, true
}

// AppendKey appends Key(s) to dst.
func AppendKey(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:]) // invalid bytes decode as RuneError, as in EqualFold
		dst = utf8.AppendRune(dst, foldRune(r))
		i += size
	}
	return dst
}

func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	if l := unicode.ToLower(least); l != least && sameOrbit(l, least) {
		return l
	}
	return least
}

func sameOrbit(a, b rune) bool {
	for f := unicode.SimpleFold(a); f != a; f = unicode.SimpleFold(f) {
		if f == b {
			return true
		}
	}
	return false
}
