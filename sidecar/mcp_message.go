package sidecar

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// mcpMessage is what the proxy reads of one JSON-RPC message a client
// POSTs: enough to route and decide, never re-encoded (what is forwarded is
// the client's bytes).
type mcpMessage struct {
	// ID is the raw id ("" for a notification or a malformed message).
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
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
		}
		return msgs, true, nil
	}
	var m mcpMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, false, err
	}
	return []mcpMessage{m}, false, nil
}

// checkUnambiguous walks every token once; it also rejects what is not
// JSON, and trailing data after the value.
func checkUnambiguous(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]struct{}
		key    bool // the next token in an object is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			top := &stack[n-1]
			if top.key {
				if d, isDelim := tok.(json.Delim); isDelim && d == '}' {
					stack = stack[:n-1]
					continue
				}
				k := strings.ToLower(tok.(string))
				if _, dup := top.keys[k]; dup {
					return fmt.Errorf("%w: key %q appears twice in one object (or twice differing only in case)", errAmbiguousJSON, tok.(string))
				}
				top.keys[k] = struct{}{}
				top.key = false
				continue
			}
			top.key = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, keys: map[string]struct{}{}, key: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
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
