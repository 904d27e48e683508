package detect

import "strings"

// cursor is one detector's place in a text: the next finding starts at or
// after pos (pos is where regexp's FindAll would search next), and a, b
// remember searches made for it (slack_token's next literals,
// private_key's END line) so that a scan stays linear however the findings
// fall.
type cursor struct {
	pos  int
	a, b int
}

func newCursor() cursor { return cursor{a: -2, b: -2} }

// find is d's next finding at or after c.pos that starts no later than
// limit, and moves c past it. Each finder enumerates Pattern(d)'s matches
// exactly as regexp's FindAll does (leftmost-first, each search starting
// where the last match ended, a match that fails Check consuming its
// bytes) but looks only where a match can be: findRuns skips 12 bytes at
// a time for cards and IBANs, long runs of few classes; the others start
// from a byte that is rare in text.
func find(d Detector, t string, c *cursor, limit int) (start, end int) {
	switch d {
	case AWSAccessKey:
		start, end = findAWS(t, c.pos, limit)
	case PrivateKey:
		start, end = findPrivateKey(t, c, limit)
	case JWT:
		start, end = findJWT(t, c.pos, limit)
	case GitHubToken:
		start, end = findGitHub(t, c.pos, limit)
	case SlackToken:
		start, end = findSlack(t, c, limit)
	case GenericAPIKey:
		start, end = findGeneric(t, c.pos, limit)
	case CreditCard:
		f, _ := findRuns(t, c.pos, limit, cCard)
		start, end = f.start, f.end
	case Email:
		start, end = findEmail(t, c.pos, limit)
	case IBAN:
		_, f := findRuns(t, c.pos, limit, cIBANRun)
		start, end = f.start, f.end
	case USSSN:
		start, end = findSSN(t, c.pos, limit)
	default:
		return -1, -1
	}
	if start >= 0 {
		c.pos = end
	} else {
		c.pos = len(t)
	}
	return start, end
}

// cardAt: \b[0-9]{4}(?:[ -]?[0-9]){9,15}\b at q, as regexp matches it: the
// most digits (up to 19) after which a word boundary falls.
func cardAt(t string, q int) int {
	if wordBefore(t, q) || q+4 > len(t) {
		return -1
	}
	for j := q; j < q+4; j++ {
		if !is(t[j], cDigit) {
			return -1
		}
	}
	var ends [20]int
	n, j := 4, q+4
	for n < 19 {
		if j < len(t) && is(t[j], cDigit) {
			j++
		} else if j+1 < len(t) && (t[j] == ' ' || t[j] == '-') && is(t[j+1], cDigit) {
			j += 2
		} else {
			break
		}
		n++
		ends[n] = j
	}
	for ; n >= 13; n-- {
		if !wordAt(t, ends[n]) {
			return ends[n]
		}
	}
	return -1
}

// ibanAt: \b[A-Z]{2}[0-9]{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,}(?:
// [A-Z0-9]{1,3})?)\b at q.
func ibanAt(t string, q int) int {
	if q+4 > len(t) || wordBefore(t, q) ||
		!(t[q] >= 'A' && t[q] <= 'Z' && t[q+1] >= 'A' && t[q+1] <= 'Z' && is(t[q+2], cDigit) && is(t[q+3], cDigit)) {
		return -1
	}
	j := q + 4
	if r := runEnd(t, j, cUpNum); r > j {
		// Unbroken: the whole run, 11 to 30 long, then a boundary.
		if n := r - j; n >= 11 && n <= 30 && !wordAt(t, r) {
			return r
		}
		return -1
	}
	groups := 0
	for j+5 <= len(t) && t[j] == ' ' && is(t[j+1], cUpNum) && is(t[j+2], cUpNum) && is(t[j+3], cUpNum) && is(t[j+4], cUpNum) {
		j += 5
		groups++
	}
	if groups < 2 {
		return -1
	}
	if j+1 < len(t) && t[j] == ' ' {
		// A last short group: it has 1 to 3 characters (4 would be a group).
		if r := runEnd(t, j+1, cUpNum); r > j+1 && !wordAt(t, r) {
			return r
		}
	}
	if !wordAt(t, j) {
		return j
	}
	// The last group runs on into a word: regexp gives it back.
	if groups > 2 {
		return j - 5
	}
	return -1
}

// findSSN: \b[0-9]{3}-[0-9]{2}-[0-9]{4}\b, looked for at each '-' three
// bytes into a match (dashes are rarer than digits). Matches cannot
// overlap (a dash is not a word byte, so a second match would start after
// a word boundary inside the first, where the first has digits on both
// sides), so a failed Check needs no care.
func findSSN(t string, i, limit int) (start, end int) {
	// A first dash has three digits before it, so none of the three bytes
	// after a dash is one: the search goes on four bytes after each dash
	// (dates, 2026-12-02, cost one search, not two).
	for j := i + 3; j < len(t); j += 4 {
		k := strings.IndexByte(t[j:], '-')
		if k < 0 {
			return -1, -1
		}
		j += k
		q := j - 3
		if q > limit {
			return -1, -1
		}
		if j+3 >= len(t) || t[j+3] != '-' { // the second dash
			continue
		}
		if e := ssnAt(t, q); e >= 0 && Check(USSSN, t[q:e]) {
			return q, e
		}
	}
	return -1, -1
}

// ssnAt: \b[0-9]{3}-[0-9]{2}-[0-9]{4}\b at q.
func ssnAt(t string, q int) int {
	if q+11 > len(t) || wordBefore(t, q) || wordAt(t, q+11) {
		return -1
	}
	for k := 0; k < 11; k++ {
		c := t[q+k]
		if k == 3 || k == 6 {
			if c != '-' {
				return -1
			}
		} else if !is(c, cDigit) {
			return -1
		}
	}
	return q + 11
}

// findAWS: \b(?:AKIA|ASIA|...)[A-Z2-7]{16}\b, looked for at each 'A' (a
// capital A is rare in text; a run of them costs one test each, as only
// an 'A' after a non-word byte can start a match).
func findAWS(t string, i, limit int) (start, end int) {
	const l = 20
	for i <= limit {
		k := strings.IndexByte(t[i:], 'A')
		if k < 0 {
			return -1, -1
		}
		q := i + k
		if q > limit || q+l > len(t) {
			return -1, -1
		}
		i = q + 1
		if wordBefore(t, q) || !awsPrefix(t[q:q+4]) || wordAt(t, q+l) {
			continue
		}
		if runEnd(t, q+4, cAWS) >= q+l {
			return q, q + l
		}
	}
	return -1, -1
}

func awsPrefix(p string) bool {
	switch p {
	case "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA":
		return true
	}
	return false
}

// findGitHub: \b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})\b.
// A match is a whole word of 40 or 93 bytes whose first '_' is its 4th or
// 7th byte: at each '_' (rarer than word bytes) the bytes before it say
// whether a match can start 3 or 6 bytes back, and only then is the word
// read. Matches come out in order: a match found at one '_' starts after
// any found at an earlier one.
func findGitHub(t string, i, limit int) (start, end int) {
	for i <= limit {
		k := strings.IndexByte(t[i:], '_')
		if k < 0 {
			return -1, -1
		}
		u := i + k
		if u-6 > limit {
			return -1, -1
		}
		// A token's first '_' is the first after i, so it starts at or
		// after i.
		q := -1
		switch {
		case u-3 >= i && t[u-3] == 'g' && t[u-2] == 'h':
			q = u - 3
		case u-6 >= i && t[u-6:u] == "github":
			q = u - 6
		}
		i = u + 1
		if q < 0 || wordBefore(t, q) {
			continue
		}
		if e := runEnd(t, u+1, cWord); gitHubToken(t[q:e]) {
			return q, e
		}
	}
	return -1, -1
}

// gitHubToken: w, a run of word bytes up to its end, is a token from its
// first byte (the caller checks the byte before).
func gitHubToken(w string) bool {
	var body string
	switch len(w) {
	case 40:
		if w[0] != 'g' || w[1] != 'h' || w[3] != '_' || strings.IndexByte("pousr", w[2]) < 0 {
			return false
		}
		body = w[4:]
		if strings.IndexByte(body, '_') >= 0 {
			return false
		}
	case 93:
		if !strings.HasPrefix(w, "github_pat_") {
			return false
		}
		body = w[11:]
	default:
		return false
	}
	for k := 0; k < len(body); k++ {
		if !is(body[k], cWord) {
			return false
		}
	}
	return true
}

// findJWT: \beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+. Each
// segment is a whole run (a shorter one would not be followed by a dot).
// Whether a candidate matches depends only on where its first segment ends,
// so after a failed one the search resumes there.
func findJWT(t string, i, limit int) (start, end int) {
	for i <= limit {
		q := indexVia(t, "eyJ", 2, i)
		if q < 0 {
			return -1, -1
		}
		if q > limit {
			return -1, -1
		}
		if wordBefore(t, q) {
			i = q + 3
			continue
		}
		e1 := runEnd(t, q+3, cB64URL)
		if e := jwtTail(t, q+3, e1); e >= 0 {
			return q, e
		}
		i = max(e1, q+3)
	}
	return -1, -1
}

func jwtTail(t string, s1, e1 int) int {
	if e1 == s1 || e1 >= len(t) || t[e1] != '.' {
		return -1
	}
	e2 := runEnd(t, e1+1, cB64URL)
	if e2 == e1+1 || e2 >= len(t) || t[e2] != '.' {
		return -1
	}
	e3 := runEnd(t, e2+1, cB64URL)
	if e3 == e2+1 {
		return -1
	}
	return e3
}

// findPrivateKey: a BEGIN line, through the first END line after it when
// there is one. c.a and c.b remember the last search for an END line (from
// where, and where it was, -1 for none), so that many BEGIN lines without
// an END do not search the rest of the text each.
func findPrivateKey(t string, c *cursor, limit int) (start, end int) {
	const begin, endLine = "-----BEGIN ", "-----END "
	i := c.pos
	for i <= limit {
		q := indexVia(t, begin, 5, i) // 'B' (rarer than G, of GET)
		if q < 0 {
			return -1, -1
		}
		if q > limit {
			return -1, -1
		}
		e := keyLabel(t, q+len(begin))
		if e < 0 {
			i = q + 1
			continue
		}
		if c.a < 0 || e < c.a || (c.b >= 0 && c.b < e) {
			c.a, c.b = e, -1
			for j := e; ; {
				k := strings.Index(t[j:], endLine)
				if k < 0 {
					break
				}
				if keyLabel(t, j+k+len(endLine)) >= 0 {
					c.b = j + k
					break
				}
				j += k + 1
			}
		}
		if c.b >= 0 {
			return q, keyLabel(t, c.b+len(endLine))
		}
		return q, e
	}
	return -1, -1
}

// keyLabel: [A-Z0-9 ]*PRIVATE KEY----- at i; its end or -1. The label's
// class holds "PRIVATE KEY" but not '-', so the dashes can only start where
// the run of the class ends.
func keyLabel(t string, i int) int {
	const tail = "PRIVATE KEY"
	r := i
	for r < len(t) && (is(t[r], cUpNum) || t[r] == ' ') {
		r++
	}
	if r-i < len(tail) || t[r-len(tail):r] != tail || !strings.HasPrefix(t[r:], "-----") {
		return -1
	}
	return r + 5
}

// findSlack: \bxox[baprs]-[A-Za-z0-9-]{10,} or
// \bhooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+; c.a and
// c.b remember the next index of each literal.
func findSlack(t string, c *cursor, limit int) (start, end int) {
	const hooks = "hooks.slack.com/services/"
	i := c.pos
	for i <= limit {
		x := nextIndexVia(t, "xox", 0, i, &c.a)
		h := nextIndexVia(t, hooks, 3, i, &c.b)
		q := x
		if q < 0 || (h >= 0 && h < q) {
			q = h
		}
		if q < 0 || q > limit {
			return -1, -1
		}
		i = q + 1
		if wordBefore(t, q) {
			continue
		}
		if q == x {
			if q+5 < len(t) && strings.IndexByte("baprs", t[q+3]) >= 0 && t[q+4] == '-' {
				if e := runEnd(t, q+5, cLabel); e-(q+5) >= 10 {
					return q, e
				}
			}
			continue
		}
		j := q + len(hooks)
		if j = slackPart(t, j, 'T', cUpNum); j < 0 || j >= len(t) || t[j] != '/' {
			continue
		}
		if j = slackPart(t, j+1, 'B', cUpNum); j < 0 || j >= len(t) || t[j] != '/' {
			continue
		}
		if e := runEnd(t, j+1, cAlnum); e > j+1 {
			return q, e
		}
	}
	return -1, -1
}

// slackPart: the letter lead then a run of class c; its end or -1.
func slackPart(t string, j int, lead byte, c uint16) int {
	if j >= len(t) || t[j] != lead {
		return -1
	}
	e := runEnd(t, j+1, c)
	if e == j+1 {
		return -1
	}
	return e
}
