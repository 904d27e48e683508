package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/engine"
)

// askSidecar asks the sidecar through the Go client, which finds it as
// every toolgate client does (the explicit URL, else TOOLGATE_URL, else the
// socket if it exists, else the loopback port) and fails closed: when the
// sidecar gives no decision, the result is a deny with code
// SIDECAR_UNAVAILABLE saying why. The hook never lets a call through that
// toolgate did not allow.
//
// With wait, an asked call is sent again naming its ApprovalRequest, and
// the sidecar holds that answer until a person decides it (or wait ends):
// only that request's timeout is stretched by the wait, so a hung sidecar
// still denies at timeout for every call.
func askSidecar(ctx context.Context, url string, timeout, wait time.Duration, req hookRequest) engine.Result {
	c, err := client.New(client.Options{URL: url, Timeout: timeout})
	if err != nil {
		return failClosed("%v", err)
	}
	defer c.Close()
	// An error comes with a deny already (the caller's context ended):
	// the result says so either way.
	res, _ := c.Evaluate(ctx, req.client)
	if wait > 0 && res.Asked() && res.Approval != nil {
		again := req.client
		again.Wait, again.Approval = wait, res.Approval.Name
		res, _ = c.Evaluate(ctx, again)
	}
	return res.Result
}

// failClosed is the deny for a decision toolgate could not make.
func failClosed(format string, args ...any) engine.Result {
	return engine.Result{Decision: engine.Deny, Code: client.CodeSidecarUnavailable, Reason: fmt.Sprintf(format, args...) + "; failing closed"}
}
