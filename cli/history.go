package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/usage"
)

// historyEntry is one earlier allowed call in an --history file. Pointers
// tell a field left out from one given as null.
type historyEntry struct {
	Time      *string  `json:"time"`
	AgentID   *string  `json:"agent_id"`
	SessionID *string  `json:"session_id"`
	ToolName  *string  `json:"tool_name"`
	Tokens    *float64 `json:"tokens"`
}

// historyCall is an entry as checked: when it was allowed, and the request
// fields the ledger counts it by.
type historyCall struct {
	at  time.Time
	req engine.Request
}

// readHistory reads an --history file (a JSON array of earlier allowed
// calls) and replays it into a ledger with the sidecar's default caps, so
// rateLimit and tokenBudget judge at now as a sidecar that had allowed
// those calls would.
func readHistory(path string, in io.Reader, now time.Time) (*usage.Ledger, error) {
	data, name, err := readFlagFile("--history", path, in)
	if err != nil {
		return nil, err
	}
	l, err := historyLedger(data, now)
	if err != nil {
		return nil, exitcode.Usagef("--history %s: %v", name, err)
	}
	return l, nil
}

// historyLedger replays a history document into a ledger with the
// sidecar's default caps; errors name neither flag nor file.
func historyLedger(data []byte, now time.Time) (*usage.Ledger, error) {
	calls, err := parseHistory(data, now)
	if err != nil {
		return nil, err
	}
	l, err := usage.New(usage.DefaultMaxKeys, usage.DefaultMaxEventsPerKey)
	if err != nil {
		return nil, err
	}
	// The ledger counts a call recorded out of order at the newest time
	// (it only ever over-counts); a file need not be sorted, so sort it.
	slices.SortStableFunc(calls, func(a, b historyCall) int { return a.at.Compare(b.at) })
	for _, c := range calls {
		if err := l.Record(c.req, c.at); err != nil {
			return nil, fmt.Errorf("the calls are more than a sidecar's ledger holds at its default --usage-max-keys: %w", err)
		}
	}
	return l, nil
}

// parseHistory checks every entry, naming the first problem by its index
// (or line). The history is a JSON array of calls, or JSON Lines, one call
// per line, as logs are kept.
func parseHistory(data []byte, now time.Time) ([]historyCall, error) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		return parseHistoryLines(data, now)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil || entries == nil {
		return nil, fmt.Errorf("not a JSON array of earlier allowed calls, like "+
			`[{"time":"2030-01-31T09:00:00Z","agent_id":"bot","session_id":"s1","tool_name":"pay","tokens":120}]: %s`, describeJSONError(data, err))
	}
	calls := make([]historyCall, 0, len(entries))
	for i, raw := range entries {
		c, err := parseHistoryEntry(raw, now)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %v", i, err)
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// parseHistoryLines reads JSON Lines: each non-blank line one call.
func parseHistoryLines(data []byte, now time.Time) ([]historyCall, error) {
	var calls []historyCall
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !json.Valid(line) {
			return nil, fmt.Errorf("line %d: not a JSON object on one line (JSON Lines: one call per line): %s", i+1, describeJSONError(line, json.Unmarshal(line, new(any))))
		}
		c, err := parseHistoryEntry(line, now)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		calls = append(calls, c)
	}
	return calls, nil
}

func parseHistoryEntry(raw json.RawMessage, now time.Time) (historyCall, error) {
	var e historyEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return historyCall{}, fmt.Errorf("%v (an entry is an object of time, agent_id, session_id, tool_name and tokens)", err)
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return historyCall{}, fmt.Errorf("null, not an object")
	}
	var c historyCall
	switch {
	case e.Time == nil:
		return c, fmt.Errorf("time is required (RFC 3339, like 2030-01-31T09:00:00Z)")
	case e.ToolName == nil:
		return c, fmt.Errorf("tool_name is required")
	case e.Tokens != nil && *e.Tokens < 0:
		return c, fmt.Errorf("tokens is %v: a call consumes 0 or more", *e.Tokens)
	}
	at, err := time.Parse(time.RFC3339Nano, *e.Time)
	if err != nil {
		return c, fmt.Errorf("time %q is not an RFC 3339 time (like 2030-01-31T09:00:00Z)", *e.Time)
	}
	if at.After(now) {
		return c, fmt.Errorf("time %s is after --now (%s): a history holds calls allowed before it", *e.Time, now.Format(time.RFC3339Nano))
	}
	c.at, c.req = at, engine.Request{engine.FieldToolName: *e.ToolName}
	if e.AgentID != nil {
		c.req[engine.FieldAgentID] = *e.AgentID
	}
	if e.SessionID != nil {
		c.req[engine.FieldSessionID] = *e.SessionID
	}
	if e.Tokens != nil {
		c.req["tokens"] = *e.Tokens
	}
	return c, nil
}

// describeJSONError says why data is not a JSON array.
func describeJSONError(data []byte, err error) string {
	if err != nil {
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			return "it is a JSON " + te.Value
		}
		return err.Error()
	}
	return "it is null"
}
