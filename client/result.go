package client

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/engine/decision"
)

// CodeSidecarUnavailable marks a result the client made itself because the
// sidecar gave no decision: unreachable, past the timeout, a non-200
// status, or an answer that is not a decision. It comes with a deny, or
// with an allow when Options.FailOpen is set.
const CodeSidecarUnavailable decision.Code = "SIDECAR_UNAVAILABLE"

// Result is a decision as the sidecar answers it: the engine's result plus
// the revision of the bundle that decided and the decision's id in the
// sidecar's decision log.
type Result struct {
	decision.Result
	BundleRevision string `json:"bundleRevision,omitempty"`
	DecisionID     string `json:"decisionId,omitempty"`
	// JudgesResults says the sidecar's bundle has result rules: a caller
	// that judges what its tools return (EvaluateResult) needs to only
	// then. A sidecar that predates result rules never sets it.
	JudgesResults bool `json:"judgesResults,omitempty"`
}

// Allowed tells whether the tool may run: only on an allow. An ask, or a
// decision this client does not know, is not an allow.
func (r *Result) Allowed() bool { return r.Decision == decision.Allow }

// Asked tells whether the call waits for a person's approval: Approval
// names the ApprovalRequest, and the same call sent again with
// Request.Approval set to its name is decided against it (or send it with
// Request.Wait to wait for the answer).
func (r *Result) Asked() bool { return r.Decision == decision.Ask }

// UnmarshalJSON reads the sidecar's answer. It is needed because the
// embedded decision.Result's UnmarshalJSON would otherwise be promoted and
// drop bundleRevision and decisionId.
func (r *Result) UnmarshalJSON(b []byte) error {
	var extra struct {
		BundleRevision string `json:"bundleRevision"`
		DecisionID     string `json:"decisionId"`
		JudgesResults  bool   `json:"judgesResults"`
	}
	if err := r.Result.UnmarshalJSON(b); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return err
	}
	r.BundleRevision, r.DecisionID, r.JudgesResults = extra.BundleRevision, extra.DecisionID, extra.JudgesResults
	return nil
}

// MarshalJSON writes what the sidecar writes, for the same reason.
func (r Result) MarshalJSON() ([]byte, error) {
	out, err := r.AppendJSON(make([]byte, 0, 256))
	if err != nil {
		return nil, err
	}
	out = out[:len(out)-1]
	if r.JudgesResults {
		out = append(out, `,"judgesResults":true`...)
	}
	if r.BundleRevision != "" {
		out = append(out, `,"bundleRevision":`...)
		out = decision.AppendJSONString(out, r.BundleRevision)
	}
	if r.DecisionID != "" {
		out = append(out, `,"decisionId":`...)
		out = decision.AppendJSONString(out, r.DecisionID)
	}
	return append(out, '}'), nil
}

// checkDecision rejects an answer that parsed but is not a decision, so a
// proxy's {} or a wrong service's JSON is never read as one. An ask is
// kept as it is: not allowed, and naming its approval.
func checkDecision(r *Result) error {
	switch r.Decision {
	case decision.Allow, decision.Deny, decision.Ask:
		return nil
	}
	return fmt.Errorf("the answer's decision is %q, not allow, deny or ask", r.Decision)
}

// unavailable is the client's own result when the sidecar gave none.
func unavailable(d decision.Decision, why string) Result {
	r := Result{}
	r.Decision, r.Code, r.Reason = d, CodeSidecarUnavailable, why
	r.Effect = r.StatedEffect()
	return r
}
