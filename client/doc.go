// Package client lets Go agents ask toolgate whether a tool call may run.
//
// Client asks the sidecar over HTTP or its Unix socket and fails closed:
// when no decision can be had (the sidecar is unreachable, too slow, or
// answers something that is not a decision) Evaluate returns a deny with
// Code CodeSidecarUnavailable and a nil error, so a caller that only reads
// Decision can never run a tool nobody allowed. Package client/local
// decides in process with the same engine the sidecar embeds, for
// programs that run no sidecar. Both are an Evaluator. This package imports
// only the standard library, the engine (for its request and result types)
// and the endpoint contract: no Kubernetes package reaches an agent that
// imports it (depguard's client-is-light and TestClientImportsNoKubernetes
// keep it so).
package client

import "context"

// Evaluator decides tool calls. Callers run the tool only when
// Result.Decision is engine.Allow.
type Evaluator interface {
	Evaluate(ctx context.Context, req Request) (Result, error)
}

var _ Evaluator = (*Client)(nil)
