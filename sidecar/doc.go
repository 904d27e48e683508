// Package sidecar is the decision server that runs next to each agent pod:
// `toolgate sidecar` answers "may this tool call run?" over localhost from
// the embedded engine.
//
// It holds exactly one compiled bundle behind an atomic pointer, so a reload
// never blocks a decision, and it fails closed: before any bundle is loaded,
// after the bundle is deleted, or when the handler itself fails, the answer
// is deny with a code. A bundle comes from one source per process (a
// ConfigMap watched through the API, a mounted ConfigMap volume, or a file;
// package bundlesource);
// a corrupt one is rejected and counted while the last good one keeps
// serving. In ConfigMap mode it also watches the namespace's FrozenAgents
// and merges them into the compiled bundle (engine.Compiled.WithFrozen), so
// a freeze does not wait for the operator; a failing watch leaves the
// bundle's freezes in force and is reported, never fatal.
//
// Every decision is written as one JSON line to the decision log (stdout,
// and optionally batched to an HTTP sink). Log sinks sit behind bounded
// queues: when they fall behind, events are dropped and counted, never
// waited for.
package sidecar
