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
	// serviceAccount is the one the sidecar ran as (service_account):
	// freezes and exceptions naming it apply again.
	serviceAccount string
	// withRequest is false when the line holds no request fields: rules
	// on input, args or kwargs see them absent.
	withRequest bool
}

// loggedStrings are the decision-log fields replay reads, each a string
// or null (decisionlog.Log writes them).
var loggedStrings = []string{"time", "decision_id", "tool_name", "agent_id", "service_account", "session_id", "tool_use_id", "framework", "decision", "code", "matched_rule_id", "approval"}

// loggedFields is about how many fields a decision-log line has.
const loggedFields = 16

// parseLoggedDecision reads one decision-log line (the sidecar's JSON
// line, decisionlog.Log) with the engine's own JSON decoder: the call, when
// and as whom it was decided, and what was decided. The top-level fields
// are the sidecar's own record of the call and win over the request fields
// --log-fields kept (which hold what it bound: roles, environment).
func parseLoggedDecision(line []byte) (replayCall, error) {
	l, err := engine.DecodeObjectSized(line, 2*engine.DefaultMaxElements, loggedFields)
	if err != nil {
		return replayCall{}, fmt.Errorf("not a JSON object: %v", strings.TrimPrefix(err.Error(), engine.ErrBadRequest.Error()+": "))
	}
	for _, f := range loggedStrings {
		if v, set := l[f]; set && v != nil {
			if _, ok := v.(string); !ok {
				return replayCall{}, fmt.Errorf("%s must be a string, not %s: is this a toolgate decision log?", f, engine.JSONKind(v))
			}
		}
	}
	str := func(f string) string { v, _ := l[f].(string); return v }
	var c replayCall
	at, tool, decision := str("time"), str("tool_name"), str("decision")
	if c.at, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return replayCall{}, fmt.Errorf("time %q is not an RFC 3339 time: is this a toolgate decision log?", at)
	}
	if _, ok := l["tool_name"]; !ok {
		return replayCall{}, errors.New("tool_name is missing: is this a toolgate decision log?")
	}
	c.id, c.decision, c.serviceAccount = str("decision_id"), engine.Decision(decision), str("service_account")
	// A call an ask rule held is logged once, with what its approval made
	// of it (allow, or deny APPROVAL_*), and names its ApprovalRequest: the
	// policy's decision was ask, which is what a candidate is compared to.
	if _, asked := l["approval"]; asked || strings.HasPrefix(str("code"), "APPROVAL_") {
		c.decision = engine.Ask
	}
	if c.decision != engine.Allow && c.decision != engine.Deny && c.decision != engine.Ask {
		return replayCall{}, fmt.Errorf("decision %q is neither allow, deny nor ask", decision)
	}
	if c.code = str("code"); c.code == "" {
		c.code = str("matched_rule_id")
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
	setString(c.req, engine.FieldAgentID, str("agent_id"))
	setString(c.req, engine.FieldSessionID, str("session_id"))
	for _, f := range []string{engine.FieldToolUseID, engine.FieldFramework} {
		if v := str(f); v != "" {
			c.req[f] = v
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
