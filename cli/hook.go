package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
)

// maxHookEvent bounds what the hook reads from stdin: Claude Code sends one
// event, and a Write of a large file is the biggest one it sends.
const maxHookEvent = 16 << 20

// HookOptions are the flags of `toolgate hook claude-code`. Its AgentID is
// the requests' agent_id: Claude Code does not name agents.
type HookOptions struct {
	deciderFlags
	// Wait, when positive, sends an asked call again with its
	// ApprovalRequest and this wait: the hook answers allow or deny once a
	// person decides it on Kubernetes (or the wait ends), instead of
	// handing the ask to the person at Claude Code's terminal.
	Wait time.Duration
}

// check refuses a wait the hook cannot keep.
func (o *HookOptions) check(command string) error {
	if err := o.deciderFlags.check(command); err != nil {
		return err
	}
	switch {
	case o.Wait < 0:
		return exitcode.Usagef("%s: --wait must not be negative, not %v", command, o.Wait)
	case o.Wait > 0 && o.BundleDir != "":
		return exitcode.Usagef("%s: --wait waits for an ApprovalRequest a sidecar makes on Kubernetes; --bundle-dir decides locally, where an ask goes to the person at the terminal: give one", command)
	}
	return nil
}

// deciderFlags say who decides the calls of a command standing in front of
// an agent's tools (the hook, the stdio guard): a sidecar, or manifests.
type deciderFlags struct {
	// URL is the sidecar (http://host:port, unix:///path); empty means
	// TOOLGATE_URL, then the default socket, then the default port.
	URL string
	// BundleDir, when set, decides locally from Policy and FrozenAgent
	// manifests (or a bundle document) instead of asking a sidecar.
	BundleDir string
	// Timeout bounds the wait for the sidecar, so a hung one denies
	// instead of stalling the agent.
	Timeout time.Duration
	// AgentID is the requests' agent_id.
	AgentID string
	// ServiceAccount, with BundleDir, is the ServiceAccount local
	// decisions are made as: where the manifests register agents (Agent
	// objects), it picks the Agent whose identity binds every call, as a
	// sidecar's own ServiceAccount does; without one such a bundle denies
	// AGENT_UNREGISTERED.
	ServiceAccount string
}

// check refuses flags that cannot decide; command prefixes the message,
// which names the flag (the client's own errors name its Go fields).
func (f *deciderFlags) check(command string) error {
	if f.URL != "" {
		if err := client.CheckURL(f.URL); err != nil {
			return exitcode.Usagef("%s: --url %v", command, err)
		}
	}
	switch {
	case f.Timeout <= 0:
		return exitcode.Usagef("%s: --timeout must be positive, not %v", command, f.Timeout)
	case f.BundleDir == "-":
		return exitcode.Usagef("%s: --bundle-dir -: stdin carries the agent's messages; give a file or directory", command)
	case f.BundleDir != "" && f.URL != "":
		return exitcode.Usagef("%s: --bundle-dir decides locally, --url asks a sidecar: give one", command)
	case f.ServiceAccount != "" && f.BundleDir == "":
		return exitcode.Usagef("%s: --service-account is only used with --bundle-dir (a sidecar learns its own from the API server)", command)
	}
	return nil
}

// register adds the flags; agentHelp says where agent_id comes from.
func (f *deciderFlags) register(cmd *cobra.Command, agentHelp string) {
	f.Timeout = 2 * time.Second
	cmd.Flags().StringVar(&f.URL, "url", "", "the sidecar: http://host:port or unix:///path (default: TOOLGATE_URL, then the socket, then "+client.DefaultURL+")")
	cmd.Flags().StringVar(&f.BundleDir, "bundle-dir", "", "decide locally from the Policy and FrozenAgent manifests in this file or directory, with no sidecar")
	cmd.Flags().DurationVar(&f.Timeout, "timeout", f.Timeout, "longest to wait for the sidecar; past it the call is denied")
	cmd.Flags().StringVar(&f.AgentID, "agent-id", "", agentHelp)
	cmd.Flags().StringVar(&f.ServiceAccount, "service-account", "", "with --bundle-dir: the ServiceAccount to decide as, which picks the registered Agent where the manifests hold Agents")
}

func newHookCommand() *cobra.Command {
	return groupCommand("hook", "Decide an agent's tool calls from its hook protocol", "agent", newClaudeCodeHookCommand())
}

func newClaudeCodeHookCommand() *cobra.Command {
	o := &HookOptions{}
	cmd := &cobra.Command{
		Use:   "claude-code",
		Short: "A Claude Code PreToolUse and PostToolUse hook: decide the tool call, and judge its result, with toolgate",
		Long: "claude-code reads one Claude Code PreToolUse hook event on stdin, decides the tool call with the\n" +
			"sidecar (--url, else TOOLGATE_URL, else " + client.DefaultSocket + " if it exists, else " + client.DefaultURL + ")\n" +
			"or locally from manifests (--bundle-dir), and prints the hook's decision JSON on stdout, exit 0.\n" +
			"It fails closed: an unreachable, slow or failing sidecar is a deny with the reason. An event it\n" +
			"cannot read exits 2 with the reason on stderr, which Claude Code treats as a block.\n" +
			"A call an ask rule decides becomes Claude Code's own \"ask\" (the person at the terminal decides),\n" +
			"unless --wait is given: then the sidecar holds it until a person approves or denies its\n" +
			"ApprovalRequest on Kubernetes, or the wait ends, and the hook answers allow or deny.\n" +
			"Registered under PostToolUse too, it judges what the tool returned with the result rules: a\n" +
			"withheld result blocks with the reason and its output is replaced by the reason; a redacted one\n" +
			"is replaced by its redacted text (an MCP tool's by every Claude Code that replaces outputs, any\n" +
			"other tool's from 2.1.121 on, which also blocks with the reason for the versions before).",
		Example: "  toolgate hook claude-code --agent-id dev-laptop\n" +
			"  toolgate hook claude-code --wait 5m\n" +
			"  toolgate hook claude-code --bundle-dir policies/",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(cmd.CommandPath()); err != nil {
				return err
			}
			return runClaudeCodeHook(cmd.Context(), o, streamsOf(cmd))
		},
	}
	o.register(cmd, "agent_id of the requests (Claude Code's events name none)")
	cmd.Flags().DurationVar(&o.Wait, "wait", 0, "wait this long for a person to approve an asked call's ApprovalRequest (the sidecar caps it at the rule's approval timeout); without it an ask goes to the person at the terminal")
	return cmd
}

// claudeCodeEvent is the part of a PreToolUse or PostToolUse event
// toolgate decides on: a PostToolUse event adds what the tool returned.
type claudeCodeEvent struct {
	HookEventName string          `json:"hook_event_name"`
	SessionID     string          `json:"session_id"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	ToolResponse  json.RawMessage `json:"tool_response"`
}

// The hook events toolgate decides.
const (
	preToolUse  = "PreToolUse"
	postToolUse = "PostToolUse"
)

// hookOutput is the documented PreToolUse answer: on exit 0 Claude Code
// reads it from stdout; permissionDecisionReason of a deny is shown to the
// model, so it can adapt instead of retrying.
type hookOutput struct {
	HookSpecificOutput hookDecision `json:"hookSpecificOutput"`
}

type hookDecision struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason"`
}

func runClaudeCodeHook(ctx context.Context, o *HookOptions, s streams) error {
	req, err := readClaudeCodeEvent(s.in, o.AgentID)
	if err != nil {
		// Exit 2 is the protocol's blocking error: the call does not run
		// and stderr is shown, which is all we can do without a tool name.
		return &exitcode.Error{Code: exitcode.Usage, Err: fmt.Errorf("toolgate hook claude-code: %w", err)}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if req.result {
		return judgeClaudeCodeResult(ctx, o, req, s)
	}

	var res engine.Result
	if o.BundleDir != "" {
		res, err = decideLocally(o.BundleDir, o.ServiceAccount, req, s.err)
		if err != nil {
			// Broken manifests are the operator's error, not the agent's:
			// block the call and say why where Claude Code shows it.
			return &exitcode.Error{Code: exitcode.Usage, Err: fmt.Errorf("toolgate hook claude-code --bundle-dir %s: %w", o.BundleDir, err)}
		}
	} else {
		res = askSidecar(ctx, o.URL, o.Timeout, o.Wait, req)
	}
	out, err := json.Marshal(hookOutput{HookSpecificOutput: hookDecision{
		HookEventName:            preToolUse,
		PermissionDecision:       permissionOf(res.Decision),
		PermissionDecisionReason: explain(&res, req.toolName),
	}})
	if err != nil {
		return fmt.Errorf("encoding the hook output: %w", err)
	}
	_, err = s.out.Write(append(out, '\n'))
	return err
}

// hookRequest is the toolgate request an event becomes: for the sidecar
// (through the Go client) and, as JSON, for the local engine. A
// PostToolUse event's is a result: response is what the tool returned,
// and body carries it as output.
type hookRequest struct {
	toolName string
	client   client.Request
	body     []byte
	result   bool
	response json.RawMessage
}

// readClaudeCodeEvent reads the event and builds the toolgate request with
// framework claude-code, the way the SDK's Claude adapters pass input.
func readClaudeCodeEvent(in io.Reader, agentID string) (hookRequest, error) {
	data, err := io.ReadAll(io.LimitReader(in, maxHookEvent+1))
	if err != nil {
		return hookRequest{}, fmt.Errorf("reading the hook event from stdin: %w", err)
	}
	if len(data) > maxHookEvent {
		return hookRequest{}, fmt.Errorf("the hook event on stdin is larger than %d bytes", maxHookEvent)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return hookRequest{}, fmt.Errorf("no hook event on stdin: expected a Claude Code PreToolUse or PostToolUse event (JSON)")
	}
	var ev claudeCodeEvent
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&ev); err != nil {
		return hookRequest{}, fmt.Errorf("the hook event on stdin is not a Claude Code PreToolUse or PostToolUse event: %v", err)
	}
	if dec.More() {
		return hookRequest{}, fmt.Errorf("the hook event on stdin holds more than one JSON value")
	}
	switch ev.HookEventName {
	case "", preToolUse, postToolUse:
	default:
		return hookRequest{}, fmt.Errorf("hook_event_name %q: toolgate decides PreToolUse and PostToolUse events only; register it under those", ev.HookEventName)
	}
	if ev.ToolName == "" {
		return hookRequest{}, fmt.Errorf("the hook event on stdin has no tool_name")
	}
	cr := client.Request{ToolName: ev.ToolName, SessionID: ev.SessionID, AgentID: agentID,
		ToolUseID: ev.ToolUseID, Framework: "claude-code"}
	if t := bytes.TrimSpace(ev.ToolInput); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if t[0] != '{' {
			return hookRequest{}, fmt.Errorf("tool_input of %s must be a JSON object", ev.ToolName)
		}
		cr.Input = ev.ToolInput
	}
	if ev.HookEventName == postToolUse {
		return resultRequest(ev, cr)
	}
	body, err := cr.MarshalJSON()
	if err != nil {
		return hookRequest{}, fmt.Errorf("encoding the request: %w", err)
	}
	return hookRequest{toolName: ev.ToolName, client: cr, body: body}, nil
}

// permissionOf is Claude Code's permissionDecision for a decision: an ask
// is Claude Code's own ask, which the person at the terminal answers;
// anything but allow and ask is a deny.
func permissionOf(d engine.Decision) string {
	switch d {
	case engine.Allow:
		return "allow"
	case engine.Ask:
		return "ask"
	}
	return "deny"
}

// explain is permissionDecisionReason: the rule id and its reason, so the
// model (or, on an ask, the person) knows what to change, or the code when
// no rule decided.
func explain(r *engine.Result, tool string) string {
	verb := "denied"
	switch r.Decision {
	case engine.Allow:
		verb = "allowed"
	case engine.Ask:
		verb = "asks a person about"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "toolgate %s %s", verb, tool)
	switch {
	case r.MatchedRuleID != "":
		fmt.Fprintf(&b, ": rule %s", r.MatchedRuleID)
		if r.MatchedPolicyID != "" {
			fmt.Fprintf(&b, " (policy %s)", r.MatchedPolicyID)
		}
		// An asking rule's call that was then denied (APPROVAL_DENIED,
		// APPROVAL_TIMEOUT, ...) says how, besides which rule asked; a
		// rule's own deny is coded by its id, named already.
		if r.Code != "" && string(r.Code) != r.MatchedRuleID && r.Decision == engine.Deny {
			fmt.Fprintf(&b, ": %s", r.Code)
		}
	case r.Code != "":
		fmt.Fprintf(&b, ": %s", r.Code)
	case r.MatchedPolicyID != "":
		fmt.Fprintf(&b, ": default of policy %s", r.MatchedPolicyID)
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, ": %s", r.Reason)
	}
	if a := r.Approval; a != nil {
		fmt.Fprintf(&b, " (ApprovalRequest %s/%s)", a.Namespace, a.Name)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "; warning: %s", w)
	}
	return b.String()
}

// decideLocally decides with the manifests `toolgate eval -f` reads,
// through the decision core the sidecar decides with, at the real clock.
func decideLocally(dir, serviceAccount string, req hookRequest, stderr io.Writer) (engine.Result, error) {
	now := time.Now()
	set, b, err := loadBundle(&sourceFlags{Paths: []string{dir}}, nil, now)
	if err != nil {
		return engine.Result{}, err
	}
	r, err := engine.DecodeRequest(req.body)
	if err != nil {
		return engine.Result{}, err
	}
	d, err := decide.NewInProcess(decide.Config{ServiceAccount: serviceAccount, Now: clockFrom(now)})
	if err != nil {
		return engine.Result{}, err
	}
	d.Serve(compileBundle(set, b, stderr), b.Revision, dir, now)
	if req.result {
		res, _ := d.DecideResult(r, false, nil)
		return res, nil
	}
	res, _ := d.Decide(r, false, nil)
	return res, nil
}
