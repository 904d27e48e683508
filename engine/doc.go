// Package engine decides whether an AI agent's tool call is allowed.
//
// One compile step (Compile) turns a Bundle of policies and frozen agents into
// an immutable Compiled form; Evaluate is a pure function of that form, the
// request and a clock. The webhook, the controller, the sidecar and the CLI
// all call Compile, so there is exactly one definition of what is valid.
//
// The request document (package request), what an evaluation answers
// (package decision) and why a policy does not compile (package diagnostic)
// live in packages of their own that need only the standard library;
// engine names everything they export (Request, Result, Diagnostic ...).
//
// The package imports nothing from Kubernetes: it is the pure core that the
// Kubernetes-facing packages feed.
package engine
