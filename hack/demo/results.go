package main

import (
	"encoding/json"
	"fmt"
)

// The results step: what a tool returned, judged by the samples' result
// rules (config/samples/policy_results_secrets.yaml) through the sidecar's
// /v1/evaluate, as a client's evaluate_result asks it after the tool ran.
var (
	// envResult is a read of a .env file whose text holds an AWS access
	// key id (AWS's documented example key).
	envResult = map[string]any{"tool_name": "Read", "agent_id": "demo-agent", "input": map[string]any{"file_path": "/workspace/.env"},
		"output": map[string]any{"text": "AWS_REGION=eu-west-1\nAWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"}}
	// bulkResult is a database query whose result reports 12480 rows.
	bulkResult = map[string]any{"tool_name": "mcp__db__query", "agent_id": "demo-agent", "input": map[string]any{"sql": "SELECT email FROM customers"},
		"output": map[string]any{"structured": map[string]any{"rowCount": 12480}}}
)

// judged is what the demo reads of a result decision, beyond a call's.
type judged struct {
	decision
	Output struct {
		Text string `json:"text"`
	} `json:"output"`
	Explanations []struct {
		RuleID      string `json:"ruleId"`
		Passed      bool   `json:"passed"`
		Explanation string `json:"explanation"`
	} `json:"explanations"`
}

// showResult asks the sidecar to judge a result with curl, as show asks
// about a call, and sums up its answer: what the agent reads of a redacted
// result, or that it reads only why; and the sentence of the rule that
// decided, which names where a secret was, never the secret.
func (d *demo) showResult(r map[string]any) error {
	line, out, err := d.curlShown("-s", "--unix-socket", d.socket, "-XPOST", "http://sidecar/v1/evaluate", "-d", compactJSON(r))
	if err != nil {
		return err
	}
	var got judged
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("%s: the sidecar's answer is not a decision: %w", line, err)
	}
	say := func(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }
	switch {
	case got.Decision == "allow" && got.Effect == "redact":
		say("    => ALLOW, REDACTED  (policy %s, rule %s): %s", got.MatchedPolicy, got.MatchedRule, got.Reason)
		say("    the agent reads: %q", got.Output.Text)
	case got.Decision == "deny":
		say("    => WITHHELD  (policy %s, rule %s): %s", got.MatchedPolicy, got.MatchedRule, got.Reason)
		say("    the agent reads only that reason, never the rows")
	default:
		return fmt.Errorf("%s: want the result redacted or withheld, got %s with effect %s", line, got.Decision, got.Effect)
	}
	for _, e := range got.Explanations {
		if e.Passed && e.RuleID == got.MatchedRule {
			say("    why: %s", e.Explanation)
		}
	}
	return nil
}

// redacts tells, quietly, whether the sidecar redacts envResult: the
// samples' result rules are in its bundle.
func (d *demo) redacts() bool { return d.decide(envResult).Effect == "redact" }
