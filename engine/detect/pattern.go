package detect

import "strings"

// Pattern is an RE2 pattern (valid for Go's regexp too) that matches what d
// finds before its Check: d's findings in a text are exactly the
// leftmost-first, non-overlapping matches of Pattern(d) (as
// regexp.FindAllStringSubmatchIndex reports them, a match that fails Check
// still consuming its bytes) for which Check holds on the span. The span is
// the pattern's first capturing group when it has one (generic_api_key's
// value), else the whole match. TestPatternAgreesWithScanner holds the
// scanner to this. The patterns spell case-insensitive names as [Aa]
// classes, not (?i): Go's (?i) also folds 'ſ' to 's' and the Kelvin sign to
// 'k', which the scanner does not.
func Pattern(d Detector) string {
	if d < numDetectors {
		return patterns[d]
	}
	return ""
}

var patterns = [numDetectors]string{
	AWSAccessKey:  `\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z2-7]{16}\b`,
	PrivateKey:    `-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----)?`,
	JWT:           `\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`,
	GitHubToken:   `\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})\b`,
	SlackToken:    `\bxox[baprs]-[A-Za-z0-9-]{10,}|\bhooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+`,
	GenericAPIKey: `(?:` + anyCase(keyNamesRE) + `)["']?[ \t]*[:=][ \t]*["']?([A-Za-z0-9_+/=.~-]{16,})`,
	CreditCard:    `\b[0-9]{4}(?:[ -]?[0-9]){9,15}\b`,
	Email:         `\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b`,
	IBAN:          `\b[A-Z]{2}[0-9]{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,}(?: [A-Z0-9]{1,3})?)\b`,
	USSSN:         `\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b`,
}

// keyNamesRE are the key-ish names of generic_api_key, lower case; anyCase
// turns each letter into a class of both cases. keyNames (find_generic.go)
// lists the same names spelled out.
const keyNamesRE = `api[_-]?key|access[_-]?key|secret(?:[_-]?key)?|token|passw(?:or)?d`

func anyCase(re string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(re); i++ {
		c := re[i]
		switch {
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case !inClass && c >= 'a' && c <= 'z':
			b.WriteByte('[')
			b.WriteByte(c - 'a' + 'A')
			b.WriteByte(c)
			b.WriteByte(']')
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
