// Command kube-apiserver builds the upstream API server from the Go module
// proxy, because envtest's prebuilt binaries cannot be downloaded here.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
