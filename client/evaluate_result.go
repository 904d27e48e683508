package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/engine/decision"
	"github.com/toolgate/toolgate/engine/output"
	"github.com/toolgate/toolgate/engine/request"
)

// ResultEvaluator judges what a tool returned, after it ran: Client asks
// the sidecar, local.Evaluator decides in process.
type ResultEvaluator interface {
	EvaluateResult(ctx context.Context, req Request, toolOutput any) (Result, error)
}

var _ ResultEvaluator = (*Client)(nil)

// errResultWaits refuses the fields of waiting for a person on a result:
// the tool already ran, so there is no call left to hold.
var errResultWaits = errors.New("toolgate: EvaluateResult: Request.Wait and Request.Approval are for a call's approval; a result is judged after the tool ran")

// EvaluateResult asks the sidecar to judge what the tool of req returned:
// req is the call as it was decided (tool name, input, ...), toolOutput
// what the tool returned, any JSON-encodable value (output.Of builds the
// request's output from it: a string is its text; an object or array is
// structured, and its JSON is the text). Only result rules run.
//
// Run the result on only when Result.Allowed: a deny withholds it (Reason
// says why). An allow with Effect decision.EffectRedact carries in
// Result.Output the output as it must be delivered, its text with every
// redacted span replaced by [REDACTED:<rule-id>] (Result.RedactedText);
// deliver that, never toolOutput. Result.Explanations say, per result rule
// that ran, whether it held and why.
//
// The sidecar giving no decision is a deny (SIDECAR_UNAVAILABLE), as for
// Evaluate; so is an output of more than the sidecar's request limit (1
// MiB with the call), which it refuses. The error is non-nil only for what
// the caller must fix (an empty ToolName, Wait or Approval set, an output
// that does not encode as JSON) or ctx ending, with a deny.
func (c *Client) EvaluateResult(ctx context.Context, req Request, toolOutput any) (Result, error) {
	body, err := req.resultJSON(toolOutput)
	if err != nil {
		return unavailable(decision.Deny, err.Error()), err
	}
	return c.evaluate(ctx, body, req.Traceparent, 0)
}

// ResultFields is the request of a result evaluation as the engine reads
// it (what package local judges): the call's fields and the output built
// from toolOutput.
func (r *Request) ResultFields(toolOutput any) (request.Request, error) {
	if err := r.checkResult(); err != nil {
		return nil, err
	}
	req, err := r.EngineRequest()
	if err != nil {
		return nil, err
	}
	out, err := output.Of(toolOutput)
	if err != nil {
		return nil, fmt.Errorf("toolgate: %w", err)
	}
	req[request.FieldOutput] = out
	return req, nil
}

func (r *Request) checkResult() error {
	if r.ToolName == "" {
		return errNoToolName
	}
	if r.Wait != 0 || r.Approval != "" {
		return errResultWaits
	}
	return nil
}

// resultJSON is the body of a result evaluation.
func (r *Request) resultJSON(toolOutput any) ([]byte, error) {
	if err := r.checkResult(); err != nil {
		return nil, err
	}
	out, err := output.Of(toolOutput)
	if err != nil {
		return nil, fmt.Errorf("toolgate: %w", err)
	}
	m := r.fields()
	m[request.FieldOutput] = out
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("toolgate: encoding the request: %w", err)
	}
	return body, nil
}

// Redacted tells whether a result decision let the output go on with
// spans redacted: deliver RedactedText (or Output), not what the tool
// returned.
func (r *Result) Redacted() bool { return r.Allowed() && r.Effect == decision.EffectRedact }

// RedactedText is the output's text as a redact decision delivers it; ""
// when the decision carries no output.
func (r *Result) RedactedText() string {
	s, _ := r.Output[request.OutputText].(string)
	return s
}
