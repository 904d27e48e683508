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
// the value. It looks at each ':' and '=' and reads back for a name. A
// name holds neither, so the separators' order is the matches' order; the
// name must start at or after pos, as FindAll's next match must.
//
// JSON and logs hold a separator every 20 bytes or so, so the cost is per
// separator: the separators of 8 bytes are found at once (sepMask), and
// each is tested without a branch for what may come before it (keyTail)
// before keyNameBefore reads back for a name.
func findGeneric(t string, from, limit int) (start, end int) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	const colons, equals = ':' * ones, '=' * ones
	i := from
	for ; i+8 <= len(t) && i <= limit; i += 8 {
		b := t[i : i+8]
		v := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		x, y := v^colons, v^equals
		// Some byte is ':' or '=' when one is flagged (a borrow flags only
		// bytes above a zero byte, so not when there is none).
		if ((x-ones)&^x|(y-ones)&^y)&highs == 0 {
			continue
		}
		for m := sepMask(x, y); m != 0; m &= m - 1 {
			s := i + bits.TrailingZeros64(m)/8
			if s > limit {
				return -1, -1
			}
			if s >= 3 && !keyTail(t[s-3], t[s-2], t[s-1]) {
				continue
			}
			if v, e := genericAt(t, s, from); v >= 0 {
				return v, e
			}
		}
	}
	for ; i < len(t) && i <= limit; i++ {
		if t[i] == ':' || t[i] == '=' {
			if v, e := genericAt(t, i, from); v >= 0 {
				return v, e
			}
		}
	}
	return -1, -1
}

// genericAt: a name before the separator at s (starting at or after from)
// and a value after it; the value's span or -1, -1.
func genericAt(t string, s, from int) (start, end int) {
	if s == 0 || !keyNameBefore(t, s, from) {
		return -1, -1
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
	return -1, -1
}

// sepMask has the high bit of byte k set when byte k of x or y is zero
// (x and y: 8 bytes xor ':' and xor '='): the exact test of a zero byte,
// which unlike the borrow test flags no byte above one.
func sepMask(x, y uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	// A byte is zero when neither its low seven bits carry into the high
	// one nor the high one is set.
	return ^((x&low7 + low7) | x | low7) | ^((y&low7 + low7) | y | low7)
}

// The key tail classes: the last letter of a name (any case) as a bit per
// name ending, the letter before it in the high nibble with the same bits,
// and a quote or a blank.
const (
	tailEY, tailET, tailEN, tailRWD = 1, 2, 4, 8 // ...ey (key), ...et, ...en, ...rd or ...wd
	tailQuote, tailBlank            = 1 << 8, 1 << 9
)

var keyTailClass = func() (t [256]uint16) {
	for _, c := range []struct {
		letter byte
		bits   uint16
	}{{'y', tailEY}, {'t', tailET}, {'n', tailEN}, {'d', tailRWD}} {
		t[c.letter] |= c.bits
		t[c.letter-'a'+'A'] |= c.bits
	}
	for _, c := range []struct {
		letter byte
		bits   uint16
	}{{'e', tailEY | tailET | tailEN}, {'r', tailRWD}, {'w', tailRWD}} {
		t[c.letter] |= c.bits << 4
		t[c.letter-'a'+'A'] |= c.bits << 4
	}
	t['"'] |= tailQuote
	t['\''] |= tailQuote
	t[' '] |= tailBlank
	t['\t'] |= tailBlank
	return t
}()

// keyTail: the last three bytes a, b, c before a separator may end a name
// as keyNameBefore reads one: the two last letters of a name (bc), or them
// then a quote (ab, c), or a blank (c: keyNameBefore reads on). In JSON
// and logs most separators fail here, without a branch to mispredict.
func keyTail(a, b, c byte) bool {
	ka, kb, kc := keyTailClass[a], keyTailClass[b], keyTailClass[c]
	quoted := -(kc >> 8 & 1) // all ones after a quote
	return (kb>>4&kc|ka>>4&kb&quoted)&0xf|kc&tailBlank != 0
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
