package engine

// Issue 28: result rules. A rule's phase says when it runs: call rules
// decide whether a tool may run, result rules judge what it returned. An
// evaluation runs the rules of one phase (EvalOptions.Phase); freezes stop
// both.

// Phase is when a rule runs.
type Phase string

const (
	// PhaseCall is the default: the rule decides the call before the tool
	// runs.
	PhaseCall Phase = "call"
	// PhaseResult rules see the call and its output (FieldOutput) and judge
	// what the tool returned: deny withholds it, redact rewrites it.
	PhaseResult Phase = "result"
)
