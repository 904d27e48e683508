package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/mcp/callresult"
)

// Judging tools/call results (issue 28), what the HTTP proxy and the stdio
// guard share: reading an answer, and what the client gets once its result
// is judged. Each side asks its own decider (result_proxy.go,
// result_stdio.go).

// Codes of results the proxy withholds without a rule's decision.
const (
	// CodeResultUnreadable: the result is not a CallToolResult result
	// rules can read (callresult.Parse), or a redaction could not be
	// applied to it.
	CodeResultUnreadable engine.Code = "RESULT_UNREADABLE"
	// CodeResultTooLarge: the result is larger than --max-result-bytes and
	// the rules judging what was held would deny or redact it.
	CodeResultTooLarge engine.Code = "RESULT_TOO_LARGE"
	// CodeResultUnjudged: a tools/call result that arrived apart from its
	// call (replayed on a session's GET stream), so no rule can judge it.
	CodeResultUnjudged engine.Code = "RESULT_UNJUDGED"
)

// DefaultMaxResultBytes is --max-result-bytes unless set: the most of a
// tools/call answer held to judge it.
const DefaultMaxResultBytes = 4 << 20

// The bounds of --max-result-bytes.
const (
	minMaxResultBytes = 1 << 10
	maxMaxResultBytes = 1 << 30
)

// CheckMaxResultBytes checks a --max-result-bytes value.
func CheckMaxResultBytes(n int) error {
	if n < minMaxResultBytes || n > maxMaxResultBytes {
		return fmt.Errorf("--max-result-bytes must be from %d to %d, not %d", minMaxResultBytes, maxMaxResultBytes, n)
	}
	return nil
}

// answer is one JSON-RPC message that may answer a pending call: its
// members, and its id and result when it is a response with a result.
type answer struct {
	members map[string]json.RawMessage
	id      json.RawMessage
	result  json.RawMessage
}

// readAnswer reads msg as a response carrying a result; ok is false for
// anything else (a request, a notification, an error, not JSON), which
// goes on as it is.
func readAnswer(msg []byte) (a answer, ok bool) {
	trimmed := bytes.TrimSpace(msg)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte(`"result"`)) {
		return a, false
	}
	if json.Unmarshal(trimmed, &a.members) != nil || a.members["method"] != nil {
		return a, false
	}
	a.id, a.result = a.members["id"], a.members["result"]
	return a, len(a.id) > 0 && len(a.result) > 0
}

// withResult is the message with its result replaced.
func (a *answer) withResult(result json.RawMessage) ([]byte, error) {
	members := make(map[string]json.RawMessage, len(a.members))
	for k, v := range a.members {
		members[k] = v
	}
	members["result"] = result
	return callresult.MarshalRaw(members)
}

// sameID compares JSON-RPC ids as sent (whitespace aside).
func sameID(a, b json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
}

// delivered is what the client gets for an answer whose result cr was
// judged res (decision: the decision object shown under _meta on a
// withheld result): a deny withholds the result (an isError result naming
// the rule and reason, never the content); a redact rewrites it; anything
// else leaves the answer as it is (nil).
func delivered(a *answer, cr *callresult.Result, res *engine.Result, decision []byte, modern bool) []byte {
	switch {
	case res.Decision == engine.Deny:
		return denyCallResult(a.id, res, decision, modern)
	case res.Effect == engine.EffectRedact:
		result, err := cr.Redact(res.Redactions)
		if err == nil {
			var out []byte
			if out, err = a.withResult(result); err == nil {
				return out
			}
		}
		return withheld(a.id, CodeResultUnreadable, "the result could not be redacted as result rule "+res.MatchedRuleID+" asks ("+err.Error()+"); withheld", modern)
	}
	return nil
}

// withheld is an isError result for call id, saying why (code, reason)
// the proxy kept its result from the client.
func withheld(id json.RawMessage, code engine.Code, reason string, modern bool) []byte {
	res := engine.Result{Decision: engine.Deny, Effect: engine.EffectDeny, Code: code, Reason: reason}
	decision, _ := res.AppendJSON(nil)
	return denyCallResult(id, &res, decision, modern)
}

// tooLargeReason is why a result past --max-result-bytes was withheld.
func tooLargeReason(limit int, res *engine.Result) string {
	who := "result rule " + res.MatchedRuleID
	if res.MatchedRuleID == "" {
		who = "the judge"
	}
	return fmt.Sprintf("the result is larger than --max-result-bytes (%d bytes), so it was not held whole, and judged on its first %d bytes %s would %s it (%s); withheld",
		limit, limit, who, res.Effect, res.Reason)
}

// heldText is output.text for a result past the limit: the data held, as
// text (it is not whole JSON, so no block can be read from it).
func heldText(head []byte) string { return string(head) }

// eachMessage applies fn to msg, one message or a batch of them; a batch
// is rewritten only when a message in it changed.
func eachMessage(msg []byte, fn func([]byte) []byte) []byte {
	trimmed := bytes.TrimSpace(msg)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return fn(msg)
	}
	var batch []json.RawMessage
	if json.Unmarshal(trimmed, &batch) != nil {
		return msg
	}
	changed := false
	for i, m := range batch {
		if out := fn(m); !bytes.Equal(out, m) {
			batch[i], changed = out, true
		}
	}
	if !changed {
		return msg
	}
	out, err := callresult.MarshalRaw(batch)
	if err != nil {
		return msg
	}
	return out
}

// headID is the id of the message whose first bytes head holds, when it
// comes before the message's result (as the SDKs write it); nil when it
// cannot be told.
func headID(head []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if key == "result" {
			return nil
		}
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" {
			return v
		}
	}
	return nil
}
