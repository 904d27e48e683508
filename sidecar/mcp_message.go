package sidecar

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// mcpMessage is what the proxy reads of one JSON-RPC message a client
// POSTs: enough to route and decide, never re-encoded (what is forwarded is
// the client's bytes).
type mcpMessage struct {
	// ID is the raw id ("" for a notification or a malformed message).
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	// call is a tools/call's params, read once; nil when they are not an
	// object with a string name (such a call is refused, never forwarded).
	call *toolCallParams
}

// toolCallParams are the parts of tools/call params a decision reads.
type toolCallParams struct {
	Name      *string         `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      struct {
		AgentID   *string `json:"toolgate.dev/agent_id"`
		SessionID *string `json:"toolgate.dev/session_id"`
	} `json:"_meta"`
}

const (
	methodToolsCall           = "tools/call"
	methodToolsList           = "tools/list"
	methodSubscriptionsListen = "subscriptions/listen"
)

// wantsToolListChanges reads a subscriptions/listen request's params.
func wantsToolListChanges(params json.RawMessage) bool {
	var p struct {
		Notifications struct {
			ToolsListChanged bool `json:"toolsListChanged"`
		} `json:"notifications"`
	}
	return json.Unmarshal(params, &p) == nil && p.Notifications.ToolsListChanged
}

// maxLinearKeys is how many keys an object's duplicate check scans before
// it keeps a set instead.
const maxLinearKeys = 16

// errAmbiguousJSON refuses a body two JSON parsers could read differently:
// a key given twice in one object, or two keys differing only in case.
// encoding/json matches struct fields case-insensitively and most parsers
// keep the last duplicate, so {"name":"read_file","Name":"pay"} could be
// decided as one tool and run as another; such a body is never forwarded.
var errAmbiguousJSON = errors.New("ambiguous JSON")

// parseMCPBody reads a POST body: one message, or a batch (a JSON array).
// Every object anywhere in it is checked for ambiguous keys first.
func parseMCPBody(body []byte) (msgs []mcpMessage, batch bool, err error) {
	if err := checkUnambiguous(body); err != nil {
		return nil, false, err
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raw []json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, true, err
		}
		msgs = make([]mcpMessage, len(raw))
		for i, m := range raw {
			if err := json.Unmarshal(m, &msgs[i]); err != nil {
				return nil, true, fmt.Errorf("batch element %d: %w", i, err)
			}
			msgs[i].readCall()
		}
		return msgs, true, nil
	}
	var m mcpMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, false, err
	}
	m.readCall()
	return []mcpMessage{m}, false, nil
}

func (m *mcpMessage) readCall() {
	if m.Method != methodToolsCall {
		return
	}
	var p toolCallParams
	if json.Unmarshal(m.Params, &p) == nil && p.Name != nil {
		m.call = &p
	}
}

// checkUnambiguous walks body once, byte by byte, collecting each object's
// keys (escapes decoded, case folded as encoding/json matches struct
// fields) and refusing a repeat. It does not validate the rest of the
// JSON: the json.Unmarshal after it does, and refuses what is not JSON.
func checkUnambiguous(body []byte) error {
	var stack []*keySet // nil entries are arrays
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '{':
			stack = append(stack, &keySet{expectKey: true})
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
			end, escaped := stringEnd(body, i+1)
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

// keySet are one object's keys, folded: a list while short, a set once
// wide, so 1 MiB of keys costs no quadratic scan.
type keySet struct {
	expectKey bool
	list      []string
	set       map[string]struct{}
}

func (k *keySet) add(key string) error {
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

// stringEnd is the index of the quote closing the string starting at
// from, -1 when there is none; escaped says whether it holds a backslash.
func stringEnd(b []byte, from int) (end int, escaped bool) {
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

// foldKey is what encoding/json's case-insensitive field match sees as
// equal: ASCII lowercased, and for other text upper- then lowercased, so
// the Kelvin sign folds with k and the long s with s.
func foldKey(k string) string {
	for i := 0; i < len(k); i++ {
		if k[i] >= utf8.RuneSelf {
			return strings.ToLower(strings.ToUpper(k))
		}
	}
	return strings.ToLower(k)
}

// decodeHeaderName reads an Mcp-Name value, which a client base64-encodes
// as =?base64?...?= when the name is not plain ASCII.
func decodeHeaderName(v string) (string, error) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, nil
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", fmt.Errorf("Mcp-Name %q is not valid base64", v)
	}
	return string(b), nil
}
