// Package decide is toolgate's one decision core. A Decider holds the
// bundle being served and the freezes applied to it, the identity the
// sidecar binds into every request, the usage ledger behind rateLimit and
// tokenBudget (and the shared store behind those with store: shared), the guard (--max-evaluations, request bodies in flight,
// recovery from a failure into deny INTERNAL_ERROR) and the decision log.
//
// Everything that decides goes through it: the sidecar's /v1/evaluate, the
// MCP proxy, the stdio guard (through the sidecar or its own Decider) and
// the Claude Code hook's local mode. A decision is one pass: Decide binds,
// counts and evaluates an engine.Request built once; Answer encodes it
// with the bundle revision and a decision id; Commit counts it in the
// metrics and records it in the decision log, at once or, for a call whose
// fate is known later (an MCP call on its way upstream), through Settle and
// Record.
package decide
