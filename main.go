// Command rdmaprobe measures how many concurrent RDMA clients a verbs
// server can hold. See README.md.
package main

import (
	"os"

	"github.com/rdmaprobe/rdmaprobe/app"
)

func main() {
	os.Exit(app.Main(os.Args, app.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
