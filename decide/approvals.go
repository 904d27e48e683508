package decide

import (
	"context"

	"github.com/toolgate/toolgate/approval"
)

// Approvals keeps the ApprovalRequests of the calls ask rules hold
// (approval.Store, on the API server; nil: this sidecar cannot ask, and
// every ask is denied APPROVAL_UNAVAILABLE).
type Approvals interface {
	// Ask returns the pending ApprovalRequest for call, creating it unless
	// an identical call already has one pending (approval.Call.Key).
	// approval.ErrQueueFull past the per-agent cap of pending requests.
	Ask(ctx context.Context, call *approval.Call) (approval.Ticket, error)
	// Status is where the request named stands for call: Mismatch when it
	// is for another call, NotFound when there is none. It sees a request
	// Ask just made.
	Status(name string, call *approval.Call) approval.Status
	// WaitSynced waits for the first list of requests (Status knows only
	// what it has listed or written).
	WaitSynced(ctx context.Context) error
	// Changed is closed at the next change of any ApprovalRequest seen.
	Changed() <-chan struct{}
	// Consume records that the approved request name let its call through;
	// approval.ErrConsumed when it was used already (here or by another
	// replica): then the call is not let through.
	Consume(ctx context.Context, name string) error
}
