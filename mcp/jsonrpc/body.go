package jsonrpc

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// An MCP POST body as the proxy reads it: mcpScanner's one pass
// (scan.go), then the values it noted read into Message as
// encoding/json would read them.

// maxPooledScan keeps a scanner grown by one huge body out of the pool, as
// the decider's body buffers are kept out past the same size.
const maxPooledScan = 64 << 10

// Parse reads a POST body: one message, or a batch (a JSON array).
// Every object anywhere in it is checked for ambiguous keys.
func Parse(body []byte) (msgs []Message, batch bool, err error) {
	s := scanners.Get().(*mcpScanner)
	defer func() {
		s.data, s.cur, s.msgs = nil, nil, s.msgs[:0]
		if cap(s.folded) > maxPooledScan || cap(s.keys) > maxPooledScan/16 || cap(s.msgs) > 64 {
			return // grown for one large body: not kept for every later one
		}
		scanners.Put(s)
	}()
	s.data, s.i, s.depth = body, 0, 0
	s.ws()
	batch = s.i < len(body) && body[s.i] == '['
	if batch {
		s.msgs = s.msgs[:0]
		err = s.array(roleMessage)
	} else {
		s.msgs = append(s.msgs[:0], msgSpans{})
		s.cur = &s.msgs[0]
		s.cur.value, err = s.value(roleMessage)
	}
	if err == nil {
		s.ws()
		if s.i < len(body) {
			err = s.syntax(fmt.Sprintf("invalid character %q after the top-level value", body[s.i]))
		}
	}
	if err != nil {
		return nil, batch, err
	}
	msgs = make([]Message, len(s.msgs))
	for i := range s.msgs {
		if err := msgs[i].read(body, &s.msgs[i]); err != nil {
			if batch {
				return nil, true, fmt.Errorf("batch element %d: %w", i, err)
			}
			return nil, false, err
		}
	}
	return msgs, batch, nil
}

// read fills m from the spans the scanner noted, as json.Unmarshal into
// Message does: the message must be an object (or null), its method a
// string (or null).
func (m *Message) read(body []byte, sp *msgSpans) error {
	switch kindOf(body, sp.value) {
	case 'n':
		return nil
	case '{':
	default:
		return fmt.Errorf("json: cannot unmarshal %s into a JSON-RPC message", kindName(body, sp.value))
	}
	if sp.id.present() {
		m.ID = append(json.RawMessage(nil), body[sp.id.start:sp.id.end]...)
	}
	if sp.params.present() {
		m.Params = body[sp.params.start:sp.params.end]
	}
	switch kindOf(body, sp.method) {
	case 0, 'n':
	case '"':
		m.Method = decodeString(body[sp.method.start:sp.method.end])
	default:
		return fmt.Errorf("json: cannot unmarshal %s into the message's method, a string", kindName(body, sp.method))
	}
	switch {
	case m.Method == MethodToolsCall:
		m.Call = readCallSpans(body, sp)
	case Decided(m.Method):
		m.Request = readRequestSpans(body, sp)
	}
	return nil
}

// readRequestSpans are the params of another method decided as
// json.Unmarshal into RequestParams reads them; nil where they are not an
// object or that fails.
func readRequestSpans(body []byte, sp *msgSpans) *RequestParams {
	if kindOf(body, sp.params) != '{' {
		return nil
	}
	var p RequestParams
	var ok bool
	if p.Name, ok = optionalString(body, sp.name); !ok {
		return nil
	}
	if p.URI, ok = optionalString(body, sp.uri); !ok {
		return nil
	}
	p.Arguments = rawValue(body, sp.arguments)
	p.Ref = rawValue(body, sp.ref)
	p.Argument = rawValue(body, sp.argument)
	p.Context = rawValue(body, sp.context)
	switch kindOf(body, sp.meta) {
	case 0, 'n':
	case '{':
		if p.Meta.AgentID, ok = optionalString(body, sp.agentID); !ok {
			return nil
		}
		if p.Meta.SessionID, ok = optionalString(body, sp.sessionID); !ok {
			return nil
		}
	default:
		return nil
	}
	return &p
}

// rawValue is a json.RawMessage field as json.Unmarshal sets it: the
// value's bytes, nil when absent.
func rawValue(body []byte, v span) json.RawMessage {
	if !v.present() {
		return nil
	}
	return body[v.start:v.end]
}

// readCallSpans is a tools/call's params as json.Unmarshal into
// ToolCall reads them; nil where that fails or there is no name.
func readCallSpans(body []byte, sp *msgSpans) *ToolCall {
	if kindOf(body, sp.params) != '{' {
		return nil // absent, null or not an object: no name either way
	}
	var p ToolCall
	var ok bool
	if p.Name, ok = optionalString(body, sp.name); !ok || p.Name == nil {
		return nil
	}
	if sp.arguments.present() {
		p.Arguments = body[sp.arguments.start:sp.arguments.end]
	}
	switch kindOf(body, sp.meta) {
	case 0, 'n':
	case '{':
		p.RawMeta = body[sp.meta.start:sp.meta.end]
		if p.Meta.AgentID, ok = optionalString(body, sp.agentID); !ok {
			return nil
		}
		if p.Meta.SessionID, ok = optionalString(body, sp.sessionID); !ok {
			return nil
		}
	default:
		return nil
	}
	return &p
}

// optionalString reads a *string field: nil when absent or null, false
// when it is another kind of value.
func optionalString(body []byte, v span) (*string, bool) {
	switch kindOf(body, v) {
	case 0, 'n':
		return nil, true
	case '"':
		s := decodeString(body[v.start:v.end])
		return &s, true
	}
	return nil, false
}

// kindOf is a value's first byte, which tells its kind ('0' for every
// number); 0 when absent.
func kindOf(body []byte, v span) byte {
	if !v.present() {
		return 0
	}
	switch c := body[v.start]; c {
	case '{', '[', '"', 'n', 't', 'f':
		return c
	}
	return '0'
}

func kindName(body []byte, v span) string {
	switch kindOf(body, v) {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case '{':
		return "object"
	}
	return "number"
}

// decodeString is a string token's value, as encoding/json decodes it
// (invalid UTF-8 replaced); the token has been checked.
func decodeString(token []byte) string {
	raw := token[1 : len(token)-1]
	plain := true
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(raw)
	}
	var out string
	if err := json.Unmarshal(token, &out); err != nil {
		panic(fmt.Sprintf("a checked string token did not decode: %v", err)) // not reached
	}
	return out
}
