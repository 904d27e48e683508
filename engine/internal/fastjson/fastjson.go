// Package fastjson decodes the JSON of tool-call requests without
// reflection: the common shape, exactly as encoding/json decodes it, and
// nothing doubtful (it declines instead, for the caller to ask
// encoding/json, which also words the error). It counts values as it goes,
// so a document wider than its limit costs no more than the limit. The
// request document's decoding (engine/request: DecodeLimit, DecodeField) is
// its one user; FuzzFastDecoder there holds it equal to encoding/json.
package fastjson

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is where the fast decoder hands over to encoding/json, whose
// own limit (10000) and error then apply.
const MaxDepth = 512

// Outcome is how a decode ended.
type Outcome int

const (
	Decoded  Outcome = iota // the value is exactly encoding/json's
	Declined                // ask encoding/json, which also words the error
	TooMany                 // more values than the limit: stop, decode nothing more
)

// Object decodes a request document without reflection. It handles the
// common shape and nothing doubtful: on any syntax error, invalid UTF-8, a
// \u escape of a surrogate, a number float64 cannot hold, or deep nesting it
// gives up and the caller asks encoding/json, which also words the error.
// So when it decodes, the value is exactly what encoding/json would produce
// (FuzzFastDecoder checks this), and the rare cases keep encoding/json's
// semantics without a copy of them here. It also counts values: past
// maxElements (when positive) it stops at once with TooMany, so a wide
// document costs no more than the values it was allowed.
func Object(doc []byte, maxElements int) (map[string]any, Outcome) {
	return ObjectSized(doc, maxElements, 0)
}

// ObjectSized is Object for a document whose top-level object usually
// holds about fields members: its map is made that large at once, so it
// does not grow (and copy) as it fills.
func ObjectSized(doc []byte, maxElements, fields int) (map[string]any, Outcome) {
	p := parser{s: doc, left: maxElements - 1, topFields: fields} // the object itself is one
	if maxElements <= 0 {
		p.left = math.MaxInt
	}
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, Declined
	}
	v, ok := p.object()
	if !ok {
		if p.tooMany {
			return nil, TooMany
		}
		return nil, Declined
	}
	p.space()
	if p.i != len(p.s) {
		return nil, Declined
	}
	return v, Decoded
}

type parser struct {
	s     []byte
	i     int
	depth int
	// left is how many more values may be decoded; tooMany is set when a
	// value beyond them was met.
	left    int
	tooMany bool
	// scratch holds unescaped string bytes before they become a string.
	scratch []byte
	// topFields sizes the top-level object's map (ObjectSized).
	topFields int
}

func (p *parser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value() (any, bool) {
	if p.i >= len(p.s) {
		return nil, false
	}
	if p.left--; p.left < 0 {
		p.tooMany = true
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		m, ok := p.object()
		if !ok {
			return nil, false
		}
		return m, true
	case c == '[':
		return p.array()
	case c == '"':
		s, ok := p.str(false)
		if !ok {
			return nil, false
		}
		return s, true
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *parser) literal(word string) bool {
	if len(p.s)-p.i < len(word) || string(p.s[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

// object parses from '{'; a repeated key keeps its last value, as
// encoding/json does.
func (p *parser) object() (map[string]any, bool) {
	if p.depth++; p.depth > MaxDepth {
		return nil, false
	}
	p.i++ // '{'
	var m map[string]any
	if p.depth == 1 && p.topFields > 0 {
		m = make(map[string]any, p.topFields)
	} else {
		m = make(map[string]any)
	}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		p.depth--
		return m, true
	}
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, false
		}
		k, ok := p.str(true)
		if !ok {
			return nil, false
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.space()
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		m[k] = v
		p.space()
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			p.space()
		case '}':
			p.i++
			p.depth--
			return m, true
		default:
			return nil, false
		}
	}
}

func (p *parser) array() (any, bool) {
	if p.depth++; p.depth > MaxDepth {
		return nil, false
	}
	p.i++ // '['
	a := []any{}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.depth--
		return a, true
	}
	for {
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		a = append(a, v)
		p.space()
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			p.space()
		case ']':
			p.i++
			p.depth--
			return a, true
		default:
			return nil, false
		}
	}
}

// str parses a string from its opening quote. Keys the sidecar sees on
// every request are returned as constants, saving an allocation each.
func (p *parser) str(key bool) (string, bool) {
	p.i++ // '"'
	start := p.i
	ascii := true
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			raw := p.s[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(raw) {
				return "", false // encoding/json substitutes U+FFFD; let it
			}
			if key {
				if k, ok := knownKey(raw); ok {
					return k, true
				}
			}
			return string(raw), true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return "", false
}

// escaped finishes a string that has an escape at p.i, its content
// starting at start.
func (p *parser) escaped(start int) (string, bool) {
	b := append(p.scratch[:0], p.s[start:p.i]...)
	defer func() { p.scratch = b[:0] }()
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(b) {
				return "", false
			}
			return string(b), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			return "", false
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(p.s[p.i:])
			if !ok || (r >= 0xD800 && r <= 0xDFFF) {
				return "", false // surrogates: encoding/json pairs or replaces them
			}
			p.i += 4
			b = utf8.AppendRune(b, r)
		default:
			return "", false
		}
	}
	return "", false
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number follows JSON's grammar exactly; a short integer is converted
// directly (exact below 2^53), anything else by strconv.ParseFloat as
// encoding/json does.
func (p *parser) number() (any, bool) {
	start := p.i
	neg := p.s[p.i] == '-'
	if neg {
		p.i++
	}
	digits := p.i
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.i < len(p.s) && p.s[p.i] >= '1' && p.s[p.i] <= '9':
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
	default:
		return nil, false
	}
	integer := true
	if p.i < len(p.s) && p.s[p.i] == '.' {
		integer = false
		p.i++
		if !p.digits() {
			return nil, false
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, false
		}
	}
	if integer && p.i-digits <= 15 {
		var n int64
		for _, c := range p.s[digits:p.i] {
			n = n*10 + int64(c-'0')
		}
		f := float64(n)
		if neg {
			f = -f
		}
		return f, true
	}
	f, err := strconv.ParseFloat(string(p.s[start:p.i]), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

func (p *parser) digits() bool {
	from := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i > from
}

// knownKey returns a constant for the request's usual keys (engine's
// Field* names, and common argument names) and the decision log's (which
// toolgate replay reads a hundred thousand lines of), so decoding them
// allocates no string; the switch compares without converting raw on the
// heap. A name missing here only costs an allocation.
func knownKey(raw []byte) (string, bool) {
	switch string(raw) {
	case "tool_name":
		return "tool_name", true
	case "agent_id":
		return "agent_id", true
	case "session_id":
		return "session_id", true
	case "tool_use_id":
		return "tool_use_id", true
	case "framework":
		return "framework", true
	case "input":
		return "input", true
	case "args":
		return "args", true
	case "kwargs":
		return "kwargs", true
	case "command":
		return "command", true
	case "path":
		return "path", true
	case "file_path":
		return "file_path", true
	case "amount":
		return "amount", true
	case "time":
		return "time", true
	case "decision_id":
		return "decision_id", true
	case "service_account":
		return "service_account", true
	case "decision":
		return "decision", true
	case "effect":
		return "effect", true
	case "code":
		return "code", true
	case "reason":
		return "reason", true
	case "matched_policy_id":
		return "matched_policy_id", true
	case "matched_policy_version":
		return "matched_policy_version", true
	case "matched_rule_id":
		return "matched_rule_id", true
	case "bundle_revision":
		return "bundle_revision", true
	case "latency_ms":
		return "latency_ms", true
	case "labels":
		return "labels", true
	case "request":
		return "request", true
	}
	return "", false
}

// Count counts the JSON values in doc, stopping once the count
// passes limit. In a valid document every value is the top one, follows a
// comma, or opens a non-empty container, so the count is 1 + commas +
// non-empty containers, with strings skipped; on an invalid document it is
// only an estimate, and encoding/json rejects the document anyway.
// engine/request's FuzzFastDecoder checks it against Object's own count.
func Count(doc []byte, limit int) int {
	n := 1
	for i := 0; i < len(doc) && n <= limit; i++ {
		switch doc[i] {
		case '"':
			for i++; i < len(doc) && doc[i] != '"'; i++ {
				if doc[i] == '\\' {
					i++
				}
			}
		case ',':
			n++
		case '{', '[':
			j := i + 1
			for j < len(doc) && (doc[j] == ' ' || doc[j] == '\t' || doc[j] == '\n' || doc[j] == '\r') {
				j++
			}
			if j < len(doc) && doc[j] != '}' && doc[j] != ']' {
				n++
			}
		}
	}
	return n
}

// Value decodes doc, one JSON value with nothing after it but space, with
// at most left values; tooMany says the limit stopped it. ok is false when
// it declined.
func Value(doc []byte, left int) (v any, ok, tooMany bool) {
	p := parser{s: doc, left: left}
	p.space()
	v, ok = p.value()
	if ok {
		p.space()
		ok = p.i == len(p.s)
	}
	return v, ok, p.tooMany
}
