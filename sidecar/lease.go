package sidecar

import (
	"context"
	"fmt"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/toolgate/toolgate/bundlesource"
)

// startLease writes the sidecar's Lease (--lease-pod) when the bundle
// source reads the API: what it serves, for the operator's Enforced
// condition. A write failure is logged and counted
// (toolgate_sidecar_lease_writes_total{result="error"}), never more: the
// Lease does not gate decisions or readiness.
func (s *Server) startLease(ctx context.Context, src bundlesource.Source) error {
	api, ok := src.(interface{ API() (*rest.Config, string) })
	if s.lease == nil || !ok {
		return nil
	}
	cfg, _ := api.API()
	c, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	go s.lease.Run(ctx, c)
	return nil
}
