// Package client lets Go agents ask toolgate whether a tool call may run.
//
// Client asks the sidecar over HTTP or its Unix socket and fails closed:
// when no decision can be had (the sidecar is unreachable, too slow, or
// answers something that is not a decision) Evaluate returns a deny with
// Code CodeSidecarUnavailable and a nil error, so a caller that only reads
// Decision can never run a tool nobody allowed. Local decides in process
// with the same engine the sidecar embeds, for programs that run no
// sidecar. Both are an Evaluator.
package client

import "context"

// Evaluator decides tool calls. Callers run the tool only when
// Result.Decision is engine.Allow.
type Evaluator interface {
	Evaluate(ctx context.Context, req Request) (Result, error)
}

var (
	_ Evaluator = (*Client)(nil)
	_ Evaluator = (*Local)(nil)
)
