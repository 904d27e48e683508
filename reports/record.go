// Package reports turns the decisions sidecars log into one policy report
// per namespace (openreports.io Report, or wgpolicyk8s.io PolicyReport for
// older readers). Aggregation (aggregate.go) and report building
// (report.go) are pure; the endpoint that receives the sidecars' batches
// (endpoint.go) and the writer that keeps the reports (writer.go) do the
// I/O. Nothing here is on the decision path: a sidecar's HTTP sink drops a
// batch the endpoint refuses or does not answer, and decides on.
package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Record is what the report needs of one decision log line.
type Record struct {
	At        time.Time
	Namespace string // labels.namespace; "" when the line has none
	Agent     string
	Tool      string
	Decision  string
	Effect    string
	Code      string
	PolicyID  string
	RuleID    string
	// PolicyKind is ClusterPolicy when a ClusterPolicy decided, "" for a
	// Policy.
	PolicyKind string
	Shadow     []ShadowVerdict
}

// ShadowVerdict is an Audit-mode policy's verdict on the call: counted as
// skip, since it did not decide.
type ShadowVerdict struct {
	Kind     string `json:"kind"`
	Policy   string `json:"policy"`
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
}

// line is the decision log line (decisionlog.appendEvent) as far as the
// report reads it; unknown fields are ignored.
type line struct {
	Time       *time.Time        `json:"time"`
	AgentID    *string           `json:"agent_id"`
	ToolName   *string           `json:"tool_name"`
	Decision   string            `json:"decision"`
	Effect     string            `json:"effect"`
	Code       string            `json:"code"`
	PolicyID   *string           `json:"matched_policy_id"`
	RuleID     *string           `json:"matched_rule_id"`
	PolicyKind string            `json:"matched_policy_kind"`
	Shadow     []ShadowVerdict   `json:"shadow"`
	Labels     map[string]string `json:"labels"`
}

// MaxBatchRecords bounds the lines of one batch: the sidecar's
// --decision-log-batch defaults to 100.
const MaxBatchRecords = 10_000

// ParseBatch reads an HTTP sink batch: a JSON array of decision log lines.
// Any malformed line fails the whole batch, naming the line, so a sidecar
// of another version is seen at once rather than miscounted.
func ParseBatch(body []byte) ([]Record, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '[' {
		return nil, errors.New("the body is not a JSON array of decision log lines")
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("the body is not a JSON array of decision log lines: %w", err)
	}
	if len(raw) > MaxBatchRecords {
		return nil, fmt.Errorf("%d lines in one batch, more than %d", len(raw), MaxBatchRecords)
	}
	out := make([]Record, 0, len(raw))
	for i, r := range raw {
		rec, err := parseLine(r)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

func parseLine(raw json.RawMessage) (Record, error) {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return Record{}, fmt.Errorf("not a decision log line: %w", err)
	}
	switch {
	case l.Time == nil:
		return Record{}, errors.New(`no "time"`)
	case l.ToolName == nil:
		return Record{}, errors.New(`no "tool_name"`)
	case l.Decision == "":
		return Record{}, errors.New(`no "decision"`)
	case l.Effect == "":
		return Record{}, errors.New(`no "effect"`)
	}
	rec := Record{At: *l.Time, Namespace: l.Labels["namespace"], Tool: *l.ToolName,
		Decision: l.Decision, Effect: l.Effect, Code: l.Code, PolicyKind: l.PolicyKind, Shadow: l.Shadow}
	if l.AgentID != nil {
		rec.Agent = *l.AgentID
	}
	if l.PolicyID != nil {
		rec.PolicyID = *l.PolicyID
	}
	if l.RuleID != nil {
		rec.RuleID = *l.RuleID
	}
	for i, s := range rec.Shadow {
		if s.Policy == "" {
			return Record{}, fmt.Errorf("shadow verdict %d names no policy", i)
		}
	}
	return rec, nil
}
