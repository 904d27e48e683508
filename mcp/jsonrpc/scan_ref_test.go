package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The reference reading of a POST body: the duplicate-key walk and then
// encoding/json, as the proxy read bodies before mcpScanner. The scanner
// must read every body as this does (TestScannerReadsAsEncodingJSON,
// FuzzScannerReadsAsEncodingJSON).

// refParseMCPBody reads a POST body: one message, or a batch (a JSON array).
// Every object anywhere in it is checked for ambiguous keys first.
func refParseMCPBody(body []byte) (msgs []Message, batch bool, err error) {
	if err := refCheckUnambiguous(body); err != nil {
		return nil, false, err
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raw []json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, true, err
		}
		msgs = make([]Message, len(raw))
		for i, m := range raw {
			if err := json.Unmarshal(m, &msgs[i]); err != nil {
				return nil, true, fmt.Errorf("batch element %d: %w", i, err)
			}
			refReadCall(&msgs[i])
		}
		return msgs, true, nil
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, false, err
	}
	refReadCall(&m)
	return []Message{m}, false, nil
}

func refReadCall(m *Message) {
	if Decided(m.Method) {
		var p RequestParams
		if bytes.HasPrefix(bytes.TrimLeft(m.Params, " \t\r\n"), []byte("{")) && json.Unmarshal(m.Params, &p) == nil {
			m.Request = &p
		}
		return
	}
	if m.Method != MethodToolsCall {
		return
	}
	var p ToolCall
	if json.Unmarshal(m.Params, &p) == nil && p.Name != nil {
		m.Call = &p
	}
}

// refCheckUnambiguous walks body once, byte by byte, collecting each object's
// keys (escapes decoded, case folded as encoding/json matches struct
// fields) and refusing a repeat. It does not validate the rest of the
// JSON: the json.Unmarshal after it does, and refuses what is not JSON.
func refCheckUnambiguous(body []byte) error {
	var stack []*refKeySet // nil entries are arrays
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '{':
			stack = append(stack, &refKeySet{expectKey: true})
		case '[':
			stack = append(stack, nil)
		case '}', ']':
			if len(stack) == 0 {
				return errors.New("unbalanced JSON")
			}
			stack = stack[:len(stack)-1]
		case ',':
			if n := len(stack); n > 0 && stack[n-1] != nil {
				stack[n-1].expectKey = true
			}
		case '"':
			end, escaped := refStringEnd(body, i+1)
			if end < 0 {
				return io.ErrUnexpectedEOF
			}
			if n := len(stack); n > 0 && stack[n-1] != nil && stack[n-1].expectKey {
				key := string(body[i+1 : end])
				if escaped {
					if err := json.Unmarshal(body[i:end+1], &key); err != nil {
						return err
					}
				}
				if err := stack[n-1].add(key); err != nil {
					return err
				}
			}
			i = end
		}
	}
	return nil
}

// refKeySet are one object's keys, folded: a list while short, a set once
// wide, so 1 MiB of keys costs no quadratic scan.
type refKeySet struct {
	expectKey bool
	list      []string
	set       map[string]struct{}
}

func (k *refKeySet) add(key string) error {
	k.expectKey = false
	folded := foldKey(key)
	dup := false
	switch {
	case k.set != nil:
		_, dup = k.set[folded]
	case len(k.list) >= maxLinearKeys:
		k.set = make(map[string]struct{}, 4*maxLinearKeys)
		for _, x := range k.list {
			k.set[x] = struct{}{}
		}
		k.list = nil
		_, dup = k.set[folded]
	default:
		for _, x := range k.list {
			if x == folded {
				dup = true
				break
			}
		}
	}
	if dup {
		return fmt.Errorf("%w: key %q appears twice in one object (or twice differing only in case)", errAmbiguousJSON, key)
	}
	if k.set != nil {
		k.set[folded] = struct{}{}
	} else {
		k.list = append(k.list, folded)
	}
	return nil
}

// refStringEnd is the index of the quote closing the string starting at
// from, -1 when there is none; escaped says whether it holds a backslash.
func refStringEnd(b []byte, from int) (end int, escaped bool) {
	for j := from; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j, escaped
		}
	}
	return -1, escaped
}
