// Command toolgate is the single toolgate binary.
package main

import (
	"os"

	"github.com/toolgate/toolgate/cli"
)

func main() {
	os.Exit(cli.Execute(cli.NewRootCommand()))
}
