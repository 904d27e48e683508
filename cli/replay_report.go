package cli

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// replayReport is what a replay found: -o json writes it as it is.
type replayReport struct {
	Replayed int `json:"replayed"`
	Changed  int `json:"changed"`
	// WithoutRequest counts the lines that held no request fields.
	WithoutRequest int           `json:"withoutRequest"`
	Groups         []replayGroup `json:"groups"`

	examples int
	byKey    map[replayKey]int // index into Groups
}

// replayKey groups changes: the old and new decisions, and what decided
// each (a rule's id, a code such as AGENT_FROZEN, or "" for a policy's
// default).
type replayKey struct {
	From engine.Decision `json:"from"`
	To   engine.Decision `json:"to"`
	Rule string          `json:"rule"`
	Was  string          `json:"was"`
}

type replayGroup struct {
	replayKey
	Count    int             `json:"count"`
	Examples []replayExample `json:"examples"`
}

// replayExample names a changed line.
type replayExample struct {
	DecisionID string    `json:"decisionId,omitempty"`
	Time       time.Time `json:"time"`
	ToolName   string    `json:"toolName"`
	AgentID    string    `json:"agentId,omitempty"`
}

func newReplayReport(examples int) *replayReport {
	return &replayReport{examples: examples, byKey: map[replayKey]int{}, Groups: []replayGroup{}}
}

// add counts one re-decided call.
func (r *replayReport) add(c *replayCall, res *engine.Result) {
	r.Replayed++
	if !c.withRequest {
		r.WithoutRequest++
	}
	if res.Decision == c.decision {
		return
	}
	r.Changed++
	k := replayKey{From: c.decision, To: res.Decision, Rule: string(res.StatedCode()), Was: c.code}
	if res.Decision == engine.Allow && res.MatchedRuleID != "" {
		k.Rule = res.MatchedRuleID
	}
	i, ok := r.byKey[k]
	if !ok {
		i = len(r.Groups)
		r.byKey[k] = i
		r.Groups = append(r.Groups, replayGroup{replayKey: k, Examples: []replayExample{}})
	}
	g := &r.Groups[i]
	g.Count++
	if len(g.Examples) < r.examples {
		agent, _ := c.req[engine.FieldAgentID].(string)
		tool, _ := c.req[engine.FieldToolName].(string)
		g.Examples = append(g.Examples, replayExample{DecisionID: c.id, Time: c.at, ToolName: tool, AgentID: agent})
	}
}

// write prints the report: the largest groups first.
func (r *replayReport) write(w io.Writer, format outputFormat) error {
	sort.SliceStable(r.Groups, func(i, j int) bool { return r.Groups[i].Count > r.Groups[j].Count })
	if format == outputJSON || format == outputYAML {
		return writeStructured(w, format, r)
	}
	fmt.Fprintf(w, "%d decisions replayed, %d would change\n", r.Replayed, r.Changed)
	for _, g := range r.Groups {
		fmt.Fprintf(w, "  %s -> %s by %s (before: %s): %d\n", g.From, g.To, decidedBy(g.Rule), decidedBy(g.Was), g.Count)
		for _, e := range g.Examples {
			fmt.Fprintf(w, "    %s %s %s agent=%s\n", e.Time.Format(time.RFC3339Nano), orDash(e.DecisionID), e.ToolName, orDash(e.AgentID))
		}
	}
	if r.WithoutRequest > 0 {
		fmt.Fprintf(w, "note: %d line(s) held no request fields (the sidecar logs them with --log-fields): rules on input, args or kwargs saw them absent\n", r.WithoutRequest)
	}
	return nil
}

// decidedBy names what decided: a rule's id or a code, or the policies'
// default when neither.
func decidedBy(rule string) string {
	if rule == "" {
		return "the default"
	}
	return rule
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
