package local

import (
	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/engine"
)

// JudgeRequest judges what a tool returned: req is the call, in the
// engine's form, with its engine.FieldOutput. Only result rules run and
// nothing is counted (decide.DecideResult); truncated says the output is
// the first part of a larger one, whose every condition on output.text or
// output.structured then holds (decide.DecideResultTruncated). The stdio
// guard's --bundle-dir mode judges results with it.
func (l *Evaluator) JudgeRequest(req engine.Request, truncated bool) client.Result {
	judge := l.d.DecideResult
	if truncated {
		judge = l.d.DecideResultTruncated
	}
	res, st := judge(req, false, nil)
	res.Code = res.StatedCode()
	return client.Result{Result: res, BundleRevision: st.Revision}
}

// HasResultRules tells whether the bundle deciding now has a result rule:
// without one, results need no judging.
func (l *Evaluator) HasResultRules() bool { return l.d.State().Compiled.HasResultRules() }
