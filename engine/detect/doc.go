// Package detect finds secrets and personal data in text: the built-in
// detectors of the `detect` condition operator (issue 28). It is pure (no
// I/O) and the engine's only dependency for them.
//
// A Scanner is made once per condition for the detectors it names, and
// scans a field in one call: First (allocates nothing) or AppendAll
// (every match, left to right, none overlapping). docs/detectors.md has
// the table of what each detector finds, with examples and near misses.
//
// # What each detector finds
//
// A detector's findings are exactly Pattern(d)'s leftmost-first,
// non-overlapping matches for which Check(d) holds (a match that fails
// Check still consumes its bytes, as regexp's FindAll would). \b is an
// ASCII word boundary: a match never starts or ends inside a run of
// [A-Za-z0-9_], so a number inside a longer digit run is not a card.
//
//   - aws_access_key: AKIA, ASIA, AGPA, AIDA, AROA, ANPA, ANVA or AIPA and
//     16 of [A-Z2-7], word-bounded.
//   - private_key: a PEM "-----BEGIN <label>PRIVATE KEY-----" line (label
//     of [A-Z0-9 ]) through the first "-----END <label>PRIVATE KEY-----"
//     after it, or the BEGIN line alone when no END follows.
//   - jwt: three non-empty base64url segments ([A-Za-z0-9_-]) joined by
//     dots, the first starting "eyJ" (base64 of `{"`) at a word start.
//   - github_token: ghp_, gho_, ghu_, ghs_ or ghr_ and 36 of [A-Za-z0-9],
//     or github_pat_ and 82 of [A-Za-z0-9_], as a whole word.
//   - slack_token: xoxb-, xoxa-, xoxp-, xoxr- or xoxs- and 10 or more of
//     [A-Za-z0-9-]; or hooks.slack.com/services/T…/B…/… (a webhook URL
//     from its host on).
//   - generic_api_key: api_key, api-key, apikey, access_key (-, none),
//     secret, secret_key (-, none), token, password or passwd, in any
//     case and possibly the end of a longer name (GITHUB_TOKEN), then an
//     optional quote, ':' or '=' between optional blanks, an optional
//     quote and 16 or more of [A-Za-z0-9_+/=.~-]. The finding is the value
//     only.
//   - credit_card: 4 digits then 9 to 15 more, each optionally after one
//     space or dash (13 to 19 digits), word-bounded; Check: a known issuer
//     prefix (Visa 4, Mastercard 51-55 and 2221-2720, Amex 34 and 37,
//     Discover 6011, 65 and 644-649, JCB 3528-3589, Diners 36, 38 and
//     300-305) and the Luhn check digit.
//   - email: local part [A-Za-z0-9._%+-]+, '@', dot-separated labels of
//     [A-Za-z0-9-], the last starting with 2 or more letters, word-bounded.
//   - iban: 2 capital letters, 2 digits and 11 to 30 of [A-Z0-9], either
//     unbroken or in groups of 4 after single spaces (the last group 1 to
//     3 long), word-bounded; Check: a country of the IBAN registry and the
//     ISO 13616 mod-97 check.
//   - us_ssn: ddd-dd-dddd, word-bounded; Check: not area 000, 666 or
//     900-999, not group 00, not serial 0000.
//
// # Why a hand-written scanner and not one RE2 pattern
//
// The issue asked for "one RE2 scan per field". Measured side by side on
// the same 64 KiB texts (prose, JSON, logs, tables of numbers; nothing to
// find), in CPU time on a loaded 2-core machine: the ten patterns as one
// go-re2 alternation cost about 185 us to find no candidate, before any
// Check (Go's regexp about 16 ms), against the 100 us target; this package
// costs about 71 us for all ten with their checks (BenchmarkScan,
// BenchmarkRE2Combined; docs/detectors.md has the figures, before and
// after the shared card and IBAN pass). So each detector is a finder
// (find.go, find_runs.go, find_text.go) that looks only where its matches
// can be:
//
//   - cards and IBANs, at least 13 bytes of [0-9 -] and 14 of [A-Z0-9 ],
//     are found in one pass over the text (findRuns) that probes one byte
//     in 13 through a 256-entry class table; a probe that may be inside
//     one reads the 13 bytes around it (a match holds the 7 on one side)
//     before the pattern is tried in the run around it. The digits of logs
//     and tables are read once for both.
//   - generic_api_key finds the ':' and '=' of eight bytes at a time, and
//     tests the three bytes before each against the names' last two
//     letters (one table, no branch) before reading back for a name.
//   - the others start from a byte or literal that is rare in text, found
//     with strings.IndexByte ('A' of an AWS key, '_' of a GitHub token, 'J'
//     of eyJ, 'B' of BEGIN, 'x' of xox, '@', the dashes of an SSN).
//
// Each finder reproduces its pattern's regexp matches exactly
// (TestPatternAgreesWithScanner and FuzzScanner compare them with Go's
// regexp) and stays linear however its candidates fail (TestScanIsLinear,
// BenchmarkAdversarial).
package detect
