package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
)

// A PostToolUse event is judged with the result rules: what the tool
// returned (tool_response) becomes the request's output as the clients
// build it (engine/output.Of: a string is the text; an object or array is
// structured, its JSON the text).

// mcpToolPrefix starts the names Claude Code gives MCP tools
// (mcp__server__tool): only their output may a hook replace.
const mcpToolPrefix = "mcp__"

// postToolUseOutput is the documented PostToolUse answer: decision block
// with a reason stops Claude and shows it the reason;
// hookSpecificOutput.updatedMCPToolOutput replaces an MCP tool's output.
type postToolUseOutput struct {
	Decision           string               `json:"decision,omitempty"`
	Reason             string               `json:"reason,omitempty"`
	HookSpecificOutput *postToolUseSpecific `json:"hookSpecificOutput,omitempty"`
}

type postToolUseSpecific struct {
	HookEventName        string `json:"hookEventName"`
	AdditionalContext    string `json:"additionalContext,omitempty"`
	UpdatedMCPToolOutput any    `json:"updatedMCPToolOutput,omitempty"`
}

// resultRequest is a PostToolUse event's request: the call with the
// output built from tool_response (absent or null: no text).
func resultRequest(ev claudeCodeEvent, cr client.Request) (hookRequest, error) {
	resp := ev.ToolResponse
	if len(bytes.TrimSpace(resp)) == 0 {
		resp = json.RawMessage("null")
	}
	fields, err := cr.ResultFields(resp)
	if err != nil {
		return hookRequest{}, fmt.Errorf("tool_response of %s: %w", ev.ToolName, err)
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return hookRequest{}, fmt.Errorf("encoding the request: %w", err)
	}
	return hookRequest{toolName: ev.ToolName, client: cr, body: body, result: true, response: resp}, nil
}

// judgeClaudeCodeResult judges a PostToolUse event, locally or with the
// sidecar as a PreToolUse one is decided, and prints the answer. It
// fails closed: a sidecar that gives no decision blocks.
func judgeClaudeCodeResult(ctx context.Context, o *HookOptions, req hookRequest, s streams) error {
	var res engine.Result
	if o.BundleDir != "" {
		var err error
		res, err = decideLocally(o.BundleDir, o.ServiceAccount, req, s.err)
		if err != nil {
			return &exitcode.Error{Code: exitcode.Usage, Err: fmt.Errorf("toolgate hook claude-code --bundle-dir %s: %w", o.BundleDir, err)}
		}
	} else {
		res = askSidecarResult(ctx, o.URL, o.Timeout, req)
	}
	out, err := json.Marshal(postToolUseAnswer(&res, req.toolName))
	if err != nil {
		return fmt.Errorf("encoding the hook output: %w", err)
	}
	_, err = s.out.Write(append(out, '\n'))
	return err
}

// askSidecarResult is askSidecar for a result: the Go client judges it,
// a deny SIDECAR_UNAVAILABLE when the sidecar gives no decision.
func askSidecarResult(ctx context.Context, url string, timeout time.Duration, req hookRequest) engine.Result {
	c, err := client.New(client.Options{URL: url, Timeout: timeout})
	if err != nil {
		return failClosed("%v", err)
	}
	defer c.Close()
	res, _ := c.EvaluateResult(ctx, req.client, req.response)
	return res.Result
}

// postToolUseAnswer is what Claude Code is told of a judged result:
//   - allowed as it is: nothing to do ({});
//   - withheld (any deny, fail closed included): block with the reason,
//     and an MCP tool's output replaced by it, so the model never reads it;
//   - redacted: an MCP tool's output replaced by the redacted text; any
//     other tool's cannot be replaced (Claude Code lets a hook replace only
//     an MCP tool's), so it blocks with the reason, as a deny does.
func postToolUseAnswer(r *engine.Result, tool string) postToolUseOutput {
	mcpTool := strings.HasPrefix(tool, mcpToolPrefix)
	redacted := r.Decision == engine.Allow && r.Effect == engine.EffectRedact
	switch {
	case r.Decision == engine.Allow && !redacted:
		if len(r.Warnings) == 0 {
			return postToolUseOutput{}
		}
		return postToolUseOutput{HookSpecificOutput: &postToolUseSpecific{HookEventName: postToolUse, AdditionalContext: explainResult(r, tool)}}
	case redacted && mcpTool:
		text, _ := r.Output[engine.OutputText].(string)
		return postToolUseOutput{HookSpecificOutput: &postToolUseSpecific{HookEventName: postToolUse,
			AdditionalContext: explainResult(r, tool), UpdatedMCPToolOutput: text}}
	}
	reason := explainResult(r, tool)
	if redacted {
		reason += "; Claude Code lets a hook replace only an MCP tool's output, so this result is blocked: do not use or repeat it"
	}
	out := postToolUseOutput{Decision: "block", Reason: reason}
	if mcpTool {
		out.HookSpecificOutput = &postToolUseSpecific{HookEventName: postToolUse, UpdatedMCPToolOutput: reason}
	}
	return out
}

// explainResult says what toolgate did with a result and why: the rule
// and its reason, how many spans a redaction replaced (never what they
// held), or the code when no rule decided.
func explainResult(r *engine.Result, tool string) string {
	var b strings.Builder
	switch {
	case r.Decision != engine.Allow:
		fmt.Fprintf(&b, "toolgate withheld the result of %s", tool)
	case r.Effect == engine.EffectRedact:
		fmt.Fprintf(&b, "toolgate redacted %d span(s) of the result of %s", len(r.Redactions), tool)
	default:
		fmt.Fprintf(&b, "toolgate allowed the result of %s", tool)
	}
	switch {
	case r.MatchedRuleID != "":
		fmt.Fprintf(&b, ": rule %s", r.MatchedRuleID)
		if r.MatchedPolicyID != "" {
			fmt.Fprintf(&b, " (policy %s)", r.MatchedPolicyID)
		}
	case r.Code != "":
		fmt.Fprintf(&b, ": %s", r.Code)
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, ": %s", r.Reason)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "; warning: %s", w)
	}
	return b.String()
}
