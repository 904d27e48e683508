// Command kubectl builds the upstream kubectl v1.37.2 from the Go module
// proxy, so the real-node tests drive the cluster with a client of its own
// version (hack/setup-cluster.sh).
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
