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
// (mcp__server__tool), whose output every Claude Code with PostToolUse
// output replacement replaces (updatedMCPToolOutput); other tools' only
// from Claude Code 2.1.121 (updatedToolOutput, which the Agent SDK's
// types document as replacing any tool's output before the model sees
// it).
const mcpToolPrefix = "mcp__"

// postToolUseOutput is the documented PostToolUse answer: decision block
// with a reason shows Claude the reason (the tool has run already);
// hookSpecificOutput.updatedToolOutput replaces the tool's output before
// the model sees it, updatedMCPToolOutput an MCP tool's (the older field,
// MCP tools only).
type postToolUseOutput struct {
	Decision           string               `json:"decision,omitempty"`
	Reason             string               `json:"reason,omitempty"`
	HookSpecificOutput *postToolUseSpecific `json:"hookSpecificOutput,omitempty"`
}

type postToolUseSpecific struct {
	HookEventName        string `json:"hookEventName"`
	AdditionalContext    string `json:"additionalContext,omitempty"`
	UpdatedToolOutput    any    `json:"updatedToolOutput,omitempty"`
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
//     and the output replaced by the reason, so the model never reads it;
//   - redacted: the output replaced by its redacted text. An MCP tool's is
//     replaced by every Claude Code that replaces outputs; another tool's
//     only from 2.1.121 on, so that one also blocks with the reason,
//     which an older Claude Code, showing the original, still gives the
//     model.
func postToolUseAnswer(r *engine.Result, tool string) postToolUseOutput {
	mcpTool := strings.HasPrefix(tool, mcpToolPrefix)
	redacted := r.Decision == engine.Allow && r.Effect == engine.EffectRedact
	replace := func(with string, context string) *postToolUseSpecific {
		h := &postToolUseSpecific{HookEventName: postToolUse, AdditionalContext: context, UpdatedToolOutput: with}
		if mcpTool {
			h.UpdatedMCPToolOutput = with
		}
		return h
	}
	reason := explainResult(r, tool)
	switch {
	case r.Decision == engine.Allow && !redacted:
		if len(r.Warnings) == 0 {
			return postToolUseOutput{}
		}
		return postToolUseOutput{HookSpecificOutput: &postToolUseSpecific{HookEventName: postToolUse, AdditionalContext: reason}}
	case redacted:
		text, isText := r.Output[engine.OutputText].(string)
		if !isText {
			// A redact decision with nothing to deliver: withheld.
			reason += "; the redacted output is missing, so the result is withheld"
			break
		}
		if mcpTool {
			return postToolUseOutput{HookSpecificOutput: replace(text, reason)}
		}
		reason += "; the output is replaced by its redacted text: where Claude Code shows the original (before 2.1.121), do not use or repeat the redacted values"
		return postToolUseOutput{Decision: "block", Reason: reason, HookSpecificOutput: replace(text, "")}
	}
	return postToolUseOutput{Decision: "block", Reason: reason, HookSpecificOutput: replace(reason, "")}
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
