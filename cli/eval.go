package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/manifest"
)

// EvalOptions are the flags of `toolgate eval`.
type EvalOptions struct {
	sourceFlags
	// Request is the request file, or "-" for stdin.
	Request string
	// Explain adds the trace of every rule reached.
	Explain bool
	// Now is the clock as an RFC 3339 time; empty means the real clock.
	Now string
	// History is a file of earlier allowed calls (or "-" for stdin) that
	// rateLimit and tokenBudget count, as a sidecar would have.
	History string
	// Output is -o: text (the default) and json print the result as one
	// JSON object, yaml as YAML.
	Output outputFormat
	// ServiceAccount is the one the sidecar would run as: freezes and
	// exceptions naming it apply.
	ServiceAccount string
	// FailOnDeny makes a deny exit with exitcode.Problems, for scripts and
	// CI that check a request is refused (or allowed) by its exit status.
	FailOnDeny bool
	// Phase is call (the default: decide the call, before the tool runs)
	// or result (judge what it returned: the request carries output).
	Phase string
}

func newEvalCommand() *cobra.Command {
	o := &EvalOptions{}
	cmd := &cobra.Command{
		Use:   "eval -f PATH... --request FILE|-",
		Short: "Decide one tool call against manifests, as the cluster would",
		Long: "eval builds the namespace bundle from Policy and FrozenAgent manifests with the function the\n" +
			"operator uses, compiles it, decides the request and prints the result as one JSON object.\n" +
			"Any decision exits 0 (with --fail-on-deny a deny exits 1); compile diagnostics go to stderr.\n" +
			"Unreadable or malformed input exits 2.",
		Example: "  toolgate eval -f config/samples --request config/samples/requests/bash_rm_rf.json --explain\n" +
			`  echo '{"tool_name":"pay","kwargs":{"amount":5000}}' | toolgate eval -f config/samples --request -` + "\n" +
			"  toolgate eval -f policies/ --request req.json --history calls.json --now 2030-01-31T10:00:00Z\n" +
			`  echo '{"tool_name":"read_file","output":{"text":"key=AKIAIOSFODNN7EXAMPLE"}}' | toolgate eval -f policies/ --phase result --request -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.addArgs(args)
			return runEval(cmd, o, streamsOf(cmd))
		},
	}
	o.register(cmd, true)
	cmd.Flags().StringVar(&o.Request, "request", "", "request JSON file, or - for stdin (required)")
	cmd.Flags().BoolVar(&o.Explain, "explain", false, "add a trace of every rule reached and every condition")
	cmd.Flags().StringVar(&o.Now, "now", "", "evaluate at this RFC 3339 time instead of the real clock")
	cmd.Flags().StringVar(&o.History, "history", "", "earlier allowed calls, each {time, agent_id, session_id, tool_name, tokens}, as a JSON array or JSON Lines, "+
		"counted by rateLimit and tokenBudget at --now as the sidecar counts them (with its default caps); - for stdin")
	cmd.Flags().StringVar(&o.ServiceAccount, "service-account", "", "decide as a sidecar running as this ServiceAccount: freezes and PolicyExceptions naming it apply")
	cmd.Flags().BoolVar(&o.FailOnDeny, "fail-on-deny", false, "exit 1 when the decision is not allow (the result is printed all the same)")
	cmd.Flags().StringVar(&o.Phase, "phase", string(engine.PhaseCall), "call: decide the call, before the tool runs; result: judge what it returned (the request carries output {text, structured, isError, size}), "+
		"and with a redact decision print the output as it would be delivered")
	registerOutput(cmd, &o.Output)
	return cmd
}

func runEval(cmd *cobra.Command, o *EvalOptions, s streams) error {
	if err := o.check(cmd); err != nil {
		return err
	}
	if o.Request == "" {
		return exitcode.Usagef("%s: --request FILE|- is required", cmd.CommandPath())
	}
	if o.ServiceAccount != "" {
		if msgs := validation.IsDNS1123Subdomain(o.ServiceAccount); len(msgs) > 0 {
			return exitcode.Usagef("%s: --service-account %q is not a ServiceAccount name: %s", cmd.CommandPath(), o.ServiceAccount, strings.Join(msgs, "; "))
		}
	}
	var stdin []string
	if slices.Contains(o.Paths, manifest.Stdin) {
		stdin = append(stdin, "-f -")
	}
	if o.Request == manifest.Stdin {
		stdin = append(stdin, "--request -")
	}
	if o.History == manifest.Stdin {
		stdin = append(stdin, "--history -")
	}
	if len(stdin) > 1 {
		return exitcode.Usagef("%s: %s cannot both read stdin", cmd.CommandPath(), strings.Join(stdin, " and "))
	}
	now, err := parseNow(o.Now)
	if err != nil {
		return err
	}
	set, b, err := loadBundle(&o.sourceFlags, s.in, now)
	if err != nil {
		return err
	}
	req, err := readRequest(o.Request, s.in)
	if err != nil {
		return err
	}
	phase, err := requestPhase(cmd.CommandPath(), o.Phase, o.Request, req)
	if err != nil {
		return err
	}
	var used engine.Usage
	if o.History != "" {
		if used, err = readHistory(o.History, s.in, now); err != nil {
			return err
		}
	}

	compiled := compileBundle(set, b, s.err)
	res := compiled.Evaluate(req, engine.EvalOptions{Now: clockFrom(now), Explain: o.Explain, Usage: used, ServiceAccount: o.ServiceAccount,
		Phase: phase})
	out, err := res.AppendJSON(nil)
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	if err := writeJSONAs(s.out, o.Output, out); err != nil {
		return err
	}
	if o.FailOnDeny && res.Decision != engine.Allow {
		return &exitcode.Error{Code: exitcode.Problems} // the result printed says why
	}
	return nil
}

// requestPhase checks --phase against the request: a result is judged
// from its output (which engine.DecodeRequest checked), which a call
// cannot have yet (a request file meant for the other phase would be
// decided as what it is not).
func requestPhase(command, phase, path string, req engine.Request) (engine.Phase, error) {
	_, hasOutput := req[engine.FieldOutput]
	switch engine.Phase(phase) {
	case engine.PhaseCall:
		if hasOutput {
			return "", exitcode.Usagef("%s: --request %s carries %s, what a tool returned: judge it with --phase result", command, path, engine.FieldOutput)
		}
	case engine.PhaseResult:
		if !hasOutput {
			return "", exitcode.Usagef("%s: --phase result judges what a tool returned: --request %s must carry %s {text, structured, isError, size}", command, path, engine.FieldOutput)
		}
	default:
		return "", exitcode.Usagef("%s: --phase %q: want call or result", command, phase)
	}
	return engine.Phase(phase), nil
}

// compileBundle compiles b, the bundle the operator would publish for set,
// printing what does not compile (evaluation denies where it reaches it)
// as the webhook would have refused it.
func compileBundle(set *manifest.Set, b engine.Bundle, stderr io.Writer) *engine.Compiled {
	compiled, diags := engine.Compile(b)
	printDiagnostics(stderr, set, diags)
	return compiled
}

func readRequest(path string, in io.Reader) (engine.Request, error) {
	data, name, err := readFlagFile("--request", path, in)
	if err != nil {
		return nil, err
	}
	req, err := engine.DecodeRequest(data)
	if err != nil {
		return nil, exitcode.Usagef("--request %s: %v", name, err)
	}
	return req, nil
}

// clockFrom is a clock that starts at start and advances in real time, so
// the evaluation budget and latency stay real under --now.
func clockFrom(start time.Time) func() time.Time {
	origin := time.Now()
	return func() time.Time { return start.Add(time.Since(origin)) }
}
