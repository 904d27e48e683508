package sidecar

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/bundlesource"
)

// startApprovals gives the decider its ApprovalRequests when the bundle
// source reads the API (--configmap): they live in the bundle's namespace,
// the sidecar's own. Without API access there is nowhere to ask, and an
// asked call is denied APPROVAL_UNAVAILABLE (decide.Resolve).
func (s *Server) startApprovals(ctx context.Context, src bundlesource.Source) error {
	api, ok := src.(interface{ API() (*rest.Config, string) })
	if !ok {
		return nil
	}
	cfg, namespace := api.API()
	store, err := approval.NewStore(cfg, namespace, approval.StoreOptions{MaxPendingPerAgent: s.opts.ApprovalsMaxPending, Logger: s.log})
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	go store.Run(ctx)
	s.d.SetApprovals(store)
	return nil
}
