// Command toolgate is the single toolgate binary: the offline CLI (eval,
// validate, bundle, version), the kill switch (freeze, unfreeze), the
// approvers' commands (approve, deny, approvals), the operator (manager)
// and the sidecar.
package main

import (
	"os"

	"github.com/toolgate/toolgate/approve"
	"github.com/toolgate/toolgate/cli"
	"github.com/toolgate/toolgate/freeze"
	"github.com/toolgate/toolgate/manager"
	"github.com/toolgate/toolgate/sidecar"
)

func main() {
	os.Exit(cli.Execute(cli.NewRootCommand(manager.NewCommand(), sidecar.NewCommand(cli.BuildVersion()),
		freeze.NewFreezeCommand(), freeze.NewUnfreezeCommand(),
		approve.NewApproveCommand(), approve.NewDenyCommand(), approve.NewApprovalsCommand())))
}
