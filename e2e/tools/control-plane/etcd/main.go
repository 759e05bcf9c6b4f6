// Command etcd starts the etcd server of the Kubernetes release the tests pin, built from
// go.etcd.io/etcd/server/v3 at the version that release's go.mod requires.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
