package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// replayCall is a logged decision ready to decide again.
type replayCall struct {
	at       time.Time
	id       string
	req      engine.Request
	decision engine.Decision
	// code is what the log stated decided: a code, else the rule's id.
	code string
	// withRequest is false when the line holds no request fields: rules
	// on input, args or kwargs see them absent.
	withRequest bool
}

// parseLoggedDecision reads one decision-log line (the sidecar's JSON
// line, decisionlog.Log) with the engine's own JSON decoder: the call, when
// and as whom it was decided, and what was decided. The top-level fields
// are the sidecar's own record of the call and win over the request fields
// --log-fields kept (which hold what it bound: roles, environment).
func parseLoggedDecision(line []byte) (replayCall, error) {
	l, err := engine.DecodeObject(line, 2*engine.DefaultMaxElements)
	if err != nil {
		return replayCall{}, fmt.Errorf("not a JSON object: %v", strings.TrimPrefix(err.Error(), engine.ErrBadRequest.Error()+": "))
	}
	str := func(field string) (string, error) {
		switch v := l[field].(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		default:
			return "", fmt.Errorf("%s must be a string, not %s: is this a toolgate decision log?", field, engine.JSONKind(v))
		}
	}
	var c replayCall
	var fields [8]string
	for i, f := range []string{"time", "decision_id", "tool_name", "agent_id", "session_id", "decision", "code", "matched_rule_id"} {
		if fields[i], err = str(f); err != nil {
			return replayCall{}, err
		}
	}
	at, id, tool, agent, session, decision, code, rule := fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], fields[6], fields[7]
	if c.at, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return replayCall{}, fmt.Errorf("time %q is not an RFC 3339 time: is this a toolgate decision log?", at)
	}
	if _, ok := l["tool_name"]; !ok {
		return replayCall{}, errors.New("tool_name is missing: is this a toolgate decision log?")
	}
	c.id, c.decision = id, engine.Decision(decision)
	if c.decision != engine.Allow && c.decision != engine.Deny {
		return replayCall{}, fmt.Errorf("decision %q is neither allow nor deny", decision)
	}
	c.code = code
	if c.code == "" {
		c.code = rule
	}
	c.req = engine.Request{}
	switch r := l["request"].(type) {
	case nil:
	case map[string]any:
		c.req, c.withRequest = r, true
	default:
		return replayCall{}, errors.New("request: not a JSON object")
	}
	c.req[engine.FieldToolName] = tool
	setString(c.req, engine.FieldAgentID, agent)
	setString(c.req, engine.FieldSessionID, session)
	for _, f := range []string{engine.FieldToolUseID, engine.FieldFramework} {
		s, err := str(f)
		if err != nil {
			return replayCall{}, err
		}
		if s != "" {
			c.req[f] = s
		}
	}
	// The checks the sidecar made of the request when it came.
	if err := c.req.Validate(); err != nil {
		return replayCall{}, fmt.Errorf("request: %v", err)
	}
	return c, nil
}

func setString(req engine.Request, field, v string) {
	if v != "" {
		req[field] = v
	} else {
		delete(req, field)
	}
}
