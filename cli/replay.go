package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/manifest"
	"github.com/toolgate/toolgate/usage"
)

// ReplayOptions are the flags of `toolgate replay`.
type ReplayOptions struct {
	sourceFlags
	// FailOnChange exits 1 when a decision would change.
	FailOnChange bool
	// Examples is how many lines each group of changes shows.
	Examples int
	// Output is -o: text or json (yaml likewise).
	Output outputFormat
}

func newReplayCommand() *cobra.Command {
	o := &ReplayOptions{}
	cmd := &cobra.Command{
		Use:   "replay -f PATH... [LOG...]",
		Short: "Re-decide recorded decision-log lines against candidate manifests: what would change",
		Long: "replay reads the sidecar's decision log (JSON lines, from LOG files or stdin), re-decides each\n" +
			"call against the bundle built from the manifests, at the time it was recorded and as the agent\n" +
			"and session it was recorded for, counting rate limits and token budgets over the log as a\n" +
			"sidecar would, and reports how many decisions would change, grouped by old -> new decision and\n" +
			"rule, with examples. Lines without request fields (the sidecar logs them with --log-fields)\n" +
			"are decided with input, args and kwargs absent, and counted.\n" +
			"Exit 0, or 1 with --fail-on-change when a decision would change; 2 on unreadable input.",
		Example: "  toolgate replay -f candidate/ decisions.jsonl\n" +
			"  kubectl logs deploy/agent -c toolgate | toolgate replay -f candidate/ --fail-on-change -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd, o, args, streamsOf(cmd))
		},
	}
	o.register(cmd, true)
	cmd.Flags().BoolVar(&o.FailOnChange, "fail-on-change", false, "exit 1 when any decision would change")
	cmd.Flags().IntVar(&o.Examples, "examples", 3, "lines shown for each group of changes")
	registerOutput(cmd, &o.Output)
	return cmd
}

func runReplay(cmd *cobra.Command, o *ReplayOptions, logs []string, s streams) error {
	if err := o.check(cmd); err != nil {
		return err
	}
	if o.Examples < 0 {
		return exitcode.Usagef("%s: --examples must be 0 or more, not %d", cmd.CommandPath(), o.Examples)
	}
	if len(logs) == 0 {
		logs = []string{manifest.Stdin}
	}
	if slices.Contains(o.Paths, manifest.Stdin) && slices.Contains(logs, manifest.Stdin) {
		return exitcode.Usagef("%s: -f - and the log cannot both read stdin: name a LOG file", cmd.CommandPath())
	}
	calls, err := readDecisionLogs(logs, s.in)
	if err != nil {
		return err
	}
	r := newReplayReport(o.Examples)
	if len(calls) > 0 {
		// The bundle as the operator would build it at the first call:
		// a freeze that expires later is in it, and the engine lifts it
		// at each call's own time.
		set, b, err := loadBundle(&o.sourceFlags, s.in, calls[0].at)
		if err != nil {
			return err
		}
		if err := replayCalls(compileBundle(set, b, s.err), calls, r); err != nil {
			return err
		}
	}
	if err := r.write(s.out, o.Output); err != nil {
		return err
	}
	if o.FailOnChange && r.Changed > 0 {
		return &exitcode.Error{Code: exitcode.Problems}
	}
	return nil
}

// readDecisionLogs reads every line of the logs, in time order (a stable
// sort: lines of one instant keep their order). A malformed line is an
// error naming the file and line: a replay that skipped lines would
// report fewer changes than there are. Lines are parsed on every core;
// what is decided after depends on order, so that stays on one.
func readDecisionLogs(logs []string, in io.Reader) ([]replayCall, error) {
	var calls []replayCall
	for _, name := range logs {
		var data []byte
		var err error
		display := "<stdin>"
		if name == manifest.Stdin {
			data, err = io.ReadAll(in)
		} else {
			display = name
			data, err = os.ReadFile(name)
		}
		if err != nil {
			return nil, exitcode.Usagef("%s: cannot read: %v", display, unwrapPathError(err))
		}
		parsed, err := parseLogLines(data)
		if err != nil {
			return nil, exitcode.Usagef("%s:%v", display, err)
		}
		calls = append(calls, parsed...)
	}
	slices.SortStableFunc(calls, func(a, b replayCall) int { return a.at.Compare(b.at) })
	return calls, nil
}

// lineError is a line that is not a decision, by its number.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("%d: %v", e.line, e.err) }

// parseLogLines parses data's lines in chunks, one per core; the first
// malformed line (by number) is the error.
func parseLogLines(data []byte) ([]replayCall, error) {
	lines := bytes.Split(data, []byte("\n"))
	out := make([]replayCall, len(lines))
	keep := make([]bool, len(lines))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(lines)/1024))
	errs := make([]*lineError, workers)
	var wg sync.WaitGroup
	chunk := (len(lines) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, len(lines))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				if len(bytes.TrimSpace(lines[i])) == 0 {
					continue
				}
				c, err := parseLoggedDecision(lines[i])
				if err != nil {
					errs[w] = &lineError{line: i + 1, err: err}
					return
				}
				out[i], keep[i] = c, true
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return nil, e // chunks are in line order: the first is the earliest
		}
	}
	calls := out[:0]
	for i := range out {
		if keep[i] {
			calls = append(calls, out[i])
		}
	}
	return calls, nil
}

// replayCalls decides each call at its time, recording the calls the
// candidate allows into a ledger with the sidecar's default caps, as a
// sidecar serving it would have counted them.
func replayCalls(c *engine.Compiled, calls []replayCall, r *replayReport) error {
	ledger, err := usage.New(usage.DefaultMaxKeys, usage.DefaultMaxEventsPerKey)
	if err != nil {
		return err
	}
	var at time.Time
	clock := func() time.Time { return at }
	for i := range calls {
		call := &calls[i]
		at = call.at
		res := c.Evaluate(call.req, engine.EvalOptions{Now: clock, Usage: ledger, ServiceAccount: call.serviceAccount})
		if res.Decision == engine.Allow {
			// A full ledger answers USAGE_UNAVAILABLE on a sidecar; here
			// the replay goes on, and the calls past it are not counted.
			_ = ledger.Record(call.req, call.at)
		}
		r.add(call, &res)
	}
	return nil
}
