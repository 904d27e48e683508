package detect

import "strings"

// keyNames are generic_api_key's names (keyNamesRE) spelled out, lower
// case; a name matches in any case.
var keyNames = [...]string{
	"api_key", "api-key", "apikey", "access_key", "access-key", "accesskey",
	"secret", "secret_key", "secret-key", "secretkey", "token", "password", "passwd",
}

// findGeneric: a key name, an optional quote, [:=] between optional
// blanks, an optional quote, then 16 or more value bytes; the finding is
// the value. It looks at each ':' and '=' (c.a and c.b remember the next of
// each) and reads back for a name. A name holds neither, so the separators'
// order is the matches' order; the name must start at or after pos, as
// FindAll's next match must.
func findGeneric(t string, c *cursor, limit int) (start, end int) {
	from := c.pos
	i := from
	for i <= limit {
		colon := nextIndex(t, ":", i, &c.a)
		eq := nextIndex(t, "=", i, &c.b)
		s := colon
		if s < 0 || (eq >= 0 && eq < s) {
			s = eq
		}
		if s < 0 || s > limit {
			return -1, -1
		}
		i = s + 1
		if !keyNameBefore(t, s, from) {
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
	switch t[e-1] | 0x20 {
	case 'y', 't', 'n', 'd':
	default:
		return false
	}
	for _, name := range keyNames {
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
