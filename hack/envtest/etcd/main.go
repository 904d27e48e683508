// Command etcd wraps etcdmain so it can be built from the module proxy
// (etcd's own go.mod uses replace directives, so `go install` refuses it).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
