package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"
)

// The proxy reads every POST body in one pass (mcpScanner): it checks the
// JSON as encoding/json would, refuses ambiguous keys (errAmbiguousJSON)
// in every object at any depth, and notes where the few values a decision
// reads are, reading nothing twice. It replaced a duplicate-key walk and
// then encoding/json three times (message, params, and each value's
// validity pass), which was 14 of the 21 µs BenchmarkMCPDecideCall took
// and 40 µs of each proxied call on the measuring VM. What it must read
// exactly as encoding/json does into Message and ToolCall
// (fields matched case-insensitively, null for absent, a wrongly typed
// value an error) is held to the encoding/json reading it replaced by a
// differential test and fuzzing (scan_test.go).

// span is where a value is in the body; a zero span is an absent value.
type span struct{ start, end int }

func (s span) present() bool { return s.end > s.start }

// msgSpans is where one message's values are.
type msgSpans struct {
	value                 span // the message itself
	id, method, params    span
	name, arguments, meta span // in params, when an object
	uri, ref, argument    span // in params too, for the other methods decided
	context               span
	agentID, sessionID    span // in params._meta, when an object
}

// scanRole says which keys of an object the scanner notes.
type scanRole uint8

const (
	roleNone scanRole = iota
	roleMessage
	roleParams
	roleMeta
)

// maxJSONDepth is encoding/json's nesting limit, kept so the two refuse
// the same bodies.
const maxJSONDepth = 10000

type mcpScanner struct {
	data []byte
	i    int
	// folded holds the current objects' keys, folded; keys the spans in it
	// of each open object's keys, from its frame's first.
	folded []byte
	keys   []span
	depth  int
	msgs   []msgSpans
	cur    *msgSpans
}

var scanners = sync.Pool{New: func() any { return &mcpScanner{} }}

var errJSONSyntax = errors.New("invalid JSON")

func (s *mcpScanner) syntax(what string) error {
	if s.i >= len(s.data) {
		return fmt.Errorf("%w: unexpected end of input", errJSONSyntax)
	}
	return fmt.Errorf("%w: %s at offset %d", errJSONSyntax, what, s.i)
}

func (s *mcpScanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads one value at s.i (after whitespace), noting what role asks.
func (s *mcpScanner) value(role scanRole) (span, error) {
	s.ws()
	start := s.i
	if s.i >= len(s.data) {
		return span{}, s.syntax("")
	}
	var err error
	switch c := s.data[s.i]; {
	case c == '{':
		err = s.object(role)
	case c == '[':
		err = s.array(roleNone)
	case c == '"':
		_, err = s.str()
	case c == '-' || (c >= '0' && c <= '9'):
		err = s.number()
	case c == 't':
		err = s.literal("true")
	case c == 'f':
		err = s.literal("false")
	case c == 'n':
		err = s.literal("null")
	default:
		err = s.syntax(fmt.Sprintf("invalid character %q looking for a value", c))
	}
	return span{start, s.i}, err
}

func (s *mcpScanner) enter() error {
	s.depth++
	if s.depth > maxJSONDepth {
		return fmt.Errorf("%w: nested more than %d deep", errJSONSyntax, maxJSONDepth)
	}
	return nil
}

// array reads an array, each element as elem says: roleMessage for a
// batch (a top-level array), whose elements are messages, roleNone
// anywhere else.
func (s *mcpScanner) array(elem scanRole) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++ // [
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if elem == roleMessage {
			s.msgs = append(s.msgs, msgSpans{})
			s.cur = &s.msgs[len(s.msgs)-1]
		}
		v, err := s.value(elem)
		if err != nil {
			return err
		}
		if elem == roleMessage {
			s.cur.value = v
		}
		s.ws()
		if s.i >= len(s.data) {
			return s.syntax("")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("expected , or ] in an array")
		}
	}
}

func (s *mcpScanner) object(role scanRole) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++ // {
	frame, foldedAt := len(s.keys), len(s.folded)
	var wide map[string]struct{} // past maxLinearKeys keys
	defer func() { s.keys, s.folded = s.keys[:frame], s.folded[:foldedAt] }()
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return s.syntax("expected a string key in an object")
		}
		keyAt := s.i
		escaped, err := s.str()
		if err != nil {
			return err
		}
		key, err := s.fold(s.data[keyAt:s.i], escaped)
		if err != nil {
			return err
		}
		if wide, err = s.addKey(frame, key, wide, s.data[keyAt:s.i]); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return s.syntax("expected : after an object key")
		}
		s.i++
		into := s.noteFor(role, key)
		v, err := s.value(childRole(role, key))
		if err != nil {
			return err
		}
		if into != nil {
			*into = v
		}
		s.ws()
		if s.i >= len(s.data) {
			return s.syntax("")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("expected , or } in an object")
		}
	}
}

// noteFor is where a value under key goes for role (nil: nowhere); key
// is folded, as encoding/json matches struct fields.
func (s *mcpScanner) noteFor(role scanRole, key []byte) *span {
	m := s.cur
	switch role {
	case roleMessage:
		switch string(key) {
		case "id":
			return &m.id
		case "method":
			return &m.method
		case "params":
			return &m.params
		}
	case roleParams:
		switch string(key) {
		case "name":
			return &m.name
		case "arguments":
			return &m.arguments
		case "_meta":
			return &m.meta
		case "uri":
			return &m.uri
		case "ref":
			return &m.ref
		case "argument":
			return &m.argument
		case "context":
			return &m.context
		}
	case roleMeta:
		switch string(key) {
		case "toolgate.dev/agent_id":
			return &m.agentID
		case "toolgate.dev/session_id":
			return &m.sessionID
		}
	}
	return nil
}

func childRole(role scanRole, key []byte) scanRole {
	switch {
	case role == roleMessage && string(key) == "params":
		return roleParams
	case role == roleParams && string(key) == "_meta":
		return roleMeta
	}
	return roleNone
}

// fold appends key (its quoted token) to s.folded, folded as foldKey
// folds it, and returns it there.
func (s *mcpScanner) fold(token []byte, escaped bool) ([]byte, error) {
	at := len(s.folded)
	raw := token[1 : len(token)-1]
	ascii := !escaped
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		for _, c := range raw {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			s.folded = append(s.folded, c)
		}
		return s.folded[at:], nil
	}
	key := string(raw)
	if escaped {
		if err := json.Unmarshal(token, &key); err != nil {
			return nil, err
		}
	}
	s.folded = append(s.folded, foldKey(key)...)
	return s.folded[at:], nil
}

// addKey refuses key when the object (from frame) has it already.
func (s *mcpScanner) addKey(frame int, key []byte, wide map[string]struct{}, token []byte) (map[string]struct{}, error) {
	dup := false
	switch {
	case wide != nil:
		_, dup = wide[string(key)]
	case len(s.keys)-frame >= maxLinearKeys:
		wide = make(map[string]struct{}, 4*maxLinearKeys)
		for _, k := range s.keys[frame:] {
			wide[string(s.folded[k.start:k.end])] = struct{}{}
		}
		_, dup = wide[string(key)]
	default:
		for _, k := range s.keys[frame:] {
			if string(s.folded[k.start:k.end]) == string(key) {
				dup = true
				break
			}
		}
	}
	if dup {
		return wide, fmt.Errorf("%w: key %s appears twice in one object (or twice differing only in case)", errAmbiguousJSON, token)
	}
	if wide != nil {
		wide[string(key)] = struct{}{}
	}
	end := len(s.folded)
	s.keys = append(s.keys, span{end - len(key), end})
	return wide, nil
}

// str reads a string token; escaped says it holds a backslash.
func (s *mcpScanner) str() (escaped bool, err error) {
	s.i++ // "
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			s.i++
			return escaped, nil
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.data) {
				return escaped, s.syntax("")
			}
			switch s.data[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for range 4 {
					if s.i >= len(s.data) {
						return escaped, s.syntax("")
					}
					if !isHex(s.data[s.i]) {
						return escaped, s.syntax("invalid \\u escape in a string")
					}
					s.i++
				}
			default:
				return escaped, s.syntax("invalid escape in a string")
			}
		case c < 0x20:
			return escaped, s.syntax("control character in a string")
		default:
			s.i++
		}
	}
	return escaped, s.syntax("")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (s *mcpScanner) digits() int {
	n := 0
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *mcpScanner) number() error {
	if s.data[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i >= len(s.data):
		return s.syntax("")
	case s.data[s.i] == '0':
		s.i++
	case s.data[s.i] >= '1' && s.data[s.i] <= '9':
		s.digits()
	default:
		return s.syntax("invalid number")
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.syntax("invalid number")
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.syntax("invalid number")
		}
	}
	return nil
}

func (s *mcpScanner) literal(word string) error {
	for j := 0; j < len(word); j++ {
		if s.i >= len(s.data) {
			return s.syntax("")
		}
		if s.data[s.i] != word[j] {
			return s.syntax("invalid literal")
		}
		s.i++
	}
	return nil
}
