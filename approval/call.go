// Package approval is where calls an ask rule holds wait for a person: the
// exact call an approval is bound to (Call, its argument digest), and the
// ApprovalRequests in the sidecar's namespace that carry it (Store).
package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

// Rule timeouts: an ask rule's approval.timeout is at most MaxTimeout,
// DefaultTimeout when absent (engine.DefaultApprovalTimeout).
const (
	DefaultTimeout = engine.DefaultApprovalTimeout
	MaxTimeout     = engine.MaxApprovalTimeout
)

// Codes of the decisions an approval makes.
const (
	CodeRequired  engine.Code = engine.CodeApprovalRequired
	CodeDenied    engine.Code = "APPROVAL_DENIED"
	CodeTimeout   engine.Code = "APPROVAL_TIMEOUT"
	CodeQueueFull engine.Code = "APPROVAL_QUEUE_FULL"
	// CodeInvalid denies a call that names an approval which is not for
	// it, not found, or already used.
	CodeInvalid engine.Code = "APPROVAL_INVALID"
	// CodeUnavailable denies a call that could not be asked: the
	// ApprovalRequest could not be written (the API server unreachable,
	// RBAC). Fail closed: an ask is never an allow.
	CodeUnavailable engine.Code = "APPROVAL_UNAVAILABLE"
)

// MaxPreview bounds Call.Preview: the CRD's limit.
const MaxPreview = v1alpha1.MaxApprovalPreviewLength

// Call is the one call an approval is for, and what the approver is shown.
type Call struct {
	// What binds an approval to the call: an approval allows only a call
	// whose AgentID, Tool, Server, Action and Digest are these.
	AgentID string
	Tool    string
	Server  string
	Action  string
	Digest  string

	ServiceAccount string
	// Preview is the arguments as the decision log redacts them, at most
	// MaxPreview bytes.
	Preview       string
	Policy, Rule  string
	PolicyVersion int64
	Revision      string
	Reason        string
	Timeout       time.Duration
}

// Key hashes what binds an approval to a call: an identical call reuses a
// pending ApprovalRequest by this key (a label value: 63 characters).
func (c *Call) Key() string {
	h := sha256.New()
	for _, s := range []string{c.AgentID, c.Tool, c.Server, c.Action, c.Digest} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:63]
}

// Same tells whether o is the same call as c: what an approval binds.
func (c *Call) Same(o *Call) bool {
	return c.AgentID == o.AgentID && c.Tool == o.Tool && c.Server == o.Server && c.Action == o.Action && c.Digest == o.Digest
}

// AgentKey hashes an agent id into a label value, for counting an agent's
// pending requests.
func AgentKey(agentID string) string {
	sum := sha256.Sum256([]byte(agentID))
	return hex.EncodeToString(sum[:])[:63]
}

// Ticket names the ApprovalRequest a call waits on.
type Ticket struct {
	Name, Namespace string
	ExpiresAt       time.Time
}

// State is where an ApprovalRequest stands for a call.
type State uint8

const (
	Pending State = iota
	Approved
	Denied
	Expired
	Consumed
	// NotFound: no ApprovalRequest of that name (deleted, or never made).
	NotFound
	// Mismatch: the ApprovalRequest is for another call.
	Mismatch
)

func (s State) String() string {
	return [...]string{"Pending", "Approved", "Denied", "Expired", "Consumed", "NotFound", "Mismatch"}[s]
}

// Status is an ApprovalRequest's state with the approver's words.
type Status struct {
	State     State
	Ticket    Ticket
	DecidedBy string
	Message   string
}

// ErrQueueFull is Ask's error when the agent already has the maximum of
// pending requests.
var ErrQueueFull = errors.New("the agent has too many approval requests pending")

// ErrConsumed is Consume's error when the approval was used already (by
// another call, or another replica): the call is not let through.
var ErrConsumed = errors.New("the approval was used already")
