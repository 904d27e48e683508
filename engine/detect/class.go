package detect

import "strings"

// Byte classes: one 256-entry table answers "may this byte be part of
// detector X's finding here" with one load, which is what the probes of
// find.go test.
const (
	cWord    uint16 = 1 << 0  // [A-Za-z0-9_]: the side of \b
	cDigit   uint16 = 1 << 1  // [0-9]
	cAlpha   uint16 = 1 << 2  // [A-Za-z]
	cUpNum   uint16 = 1 << 3  // [A-Z0-9]: an IBAN's characters
	cAlnum   uint16 = 1 << 4  // [A-Za-z0-9]
	cCard    uint16 = 1 << 5  // [0-9 -]: a card number with its separators
	cAWS     uint16 = 1 << 6  // [A-Z2-7]: an AWS key id's characters
	cIBANRun uint16 = 1 << 7  // [A-Z0-9 ]: an IBAN with its spaces
	cB64URL  uint16 = 1 << 8  // [A-Za-z0-9_-]: a JWT segment
	cLocal   uint16 = 1 << 9  // [A-Za-z0-9._%+-]: an email's local part
	cLabel   uint16 = 1 << 10 // [A-Za-z0-9-]: a domain label, a Slack token's body
	cValue   uint16 = 1 << 11 // [A-Za-z0-9_+/=.~-]: a generic_api_key value

	// leadShift takes a lead class to its run class: cDigit to cCard,
	// cUpNum to cIBANRun, so that one probe of find_runs.go tests both
	// detectors' "this byte or the next is a lead" with one shift.
	leadShift = 4
)

var class = func() (t [256]uint16) {
	add := func(set string, c uint16) {
		for i := 0; i < len(set); i++ {
			t[set[i]] |= c
		}
	}
	const (
		lower  = "abcdefghijklmnopqrstuvwxyz"
		upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		digits = "0123456789"
	)
	add(lower+upper+digits+"_", cWord)
	add(digits, cDigit)
	add(lower+upper, cAlpha)
	add(lower+upper+digits, cAlnum|cB64URL|cLocal|cLabel|cValue)
	add(upper+digits, cUpNum|cIBANRun)
	add(upper+"234567", cAWS)
	add("_-", cB64URL)
	add("._%+-", cLocal)
	add("-", cLabel)
	add("_+/=.~-", cValue)
	add(digits+" -", cCard)
	add(" ", cIBANRun)
	return t
}()

func is(b byte, c uint16) bool { return class[b]&c != 0 }

// wordBefore is whether the byte before i is a word byte (false at the
// start); wordAt is whether the byte at i is (false at the end). \b at i is
// wordBefore != wordAt. Bytes of multi-byte and invalid UTF-8 are not word
// bytes, as Go's and RE2's ASCII \b see them.
func wordBefore(t string, i int) bool { return i > 0 && class[t[i-1]]&cWord != 0 }
func wordAt(t string, i int) bool     { return i < len(t) && class[t[i]]&cWord != 0 }

// runEnd is the end of the run of class c that starts at i.
func runEnd(t string, i int, c uint16) int {
	for i < len(t) && class[t[i]]&c != 0 {
		i++
	}
	return i
}

// runStart is the start of the run of class c that ends at i, going back
// no further than lo.
func runStart(t string, i, lo int, c uint16) int {
	for i > lo && class[t[i-1]]&c != 0 {
		i--
	}
	return i
}

// indexVia is the first index of lit at or after from, found by looking
// for its byte at k, chosen because it is rare in text ('J' of eyJ, 'k' of
// hooks): strings.Index falls back to a slow path when lit's first byte is
// common, as 'e' and 'h' are.
func indexVia(t, lit string, k, from int) int {
	for j := from + k; j < len(t); {
		n := strings.IndexByte(t[j:], lit[k])
		if n < 0 {
			return -1
		}
		j += n
		if q := j - k; q >= from && strings.HasPrefix(t[q:], lit) {
			return q
		}
		j++
	}
	return -1
}

// nextIndexVia is indexVia remembered in *cache across calls with growing
// from (-2: not searched yet, -1: none at or after the last search), so
// that repeated searches stay linear.
func nextIndexVia(t, lit string, k, from int, cache *int) int {
	if *cache == -1 || *cache >= from {
		return *cache
	}
	*cache = indexVia(t, lit, k, from)
	return *cache
}

// The probe of find_runs.go relies on these: a compile error if not.
var (
	_ = [1]int{}[cDigit<<leadShift^cCard]
	_ = [1]int{}[cUpNum<<leadShift^cIBANRun]
)
