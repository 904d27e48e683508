package controllers

import (
	"context"
	"errors"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// publishRetryable tells whether a failed write of the bundle ConfigMap is
// expected to go through on a later try with nothing changed: the API server
// (or an admission webhook it calls) was busy, briefly unavailable or
// unreachable. Such a failure is Reconciling, not Stalled. Anything else
// (Forbidden, Invalid, RequestEntityTooLarge, an exceeded quota, an error
// this function does not know) needs someone to fix something: it is
// Stalled, and kstatus reads the object as Failed rather than waiting for it.
func publishRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case apierrors.IsConflict(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsUnexpectedServerError(err):
		return true
	case errors.Is(err, context.DeadlineExceeded), utilnet.IsTimeout(err):
		return true
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		utilnet.IsHTTP2ConnectionLost(err):
		return true
	}
	// A dial, read or write that failed on the network; not a TLS alert
	// (Op "local error" or "remote error": a certificate one side refuses
	// stays refused until it is fixed).
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "read" || op.Op == "write")
}
