package app

import (
	"github.com/urfave/cli/v2"
)

// limitFlags lower the server's own limits to reproduce an environment.
func limitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Uint64Flag{Name: "nofile", Usage: "set the server's RLIMIT_NOFILE (open files) to this"},
		&cli.Uint64Flag{Name: "memlock", Usage: "set the server's RLIMIT_MEMLOCK to this many bytes"},
	}
}

// profileFlag writes a CPU profile of serve or clients (pprof format);
// the probe commands set it per process with --profile DIR.
func profileFlag() cli.Flag {
	return &cli.StringFlag{Name: "cpuprofile", Hidden: true, Usage: "write a CPU profile of this process to `FILE`"}
}

// specFlag has serve or clients read their whole configuration as one
// JSON line (protocol.ServerSpec, protocol.GeneratorSpec) instead of flags:
// how the runner starts them.
func specFlag() cli.Flag {
	return &cli.StringFlag{Name: "spec", Hidden: true, Usage: "the whole configuration as JSON; - reads it as the first line of stdin, and implies the runner's event protocol"}
}
