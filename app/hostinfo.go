package app

import (
	"bufio"
	"encoding/json"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/runner/child"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// hostinfoCommand prints what a run records of a load-generator host:
// the SSH launcher runs it on every host before the first point.
func hostinfoCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:      "hostinfo",
		Usage:     "print this host's environment and RDMA device (kernel, CPUs, memory, device caps, port and GID) as JSON",
		UsageText: "rdmaprobe hostinfo --backend verbs --device mlx5_0",
		Description: "What a run records of each load-generator host (--hosts): the launcher runs it there\n" +
			"with the run's fabric. The GID is the one the generators would use (RoCE v2, IPv4-mapped first).",
		Flags: append(fabricFlags(), specFlag()),
		Action: func(c *cli.Context) error {
			f := fabricSpec(c, c.String("backend"))
			if c.IsSet("spec") {
				f = protocol.Fabric{}
				if err := readSpec(c, bufio.NewReader(s.In), &f); err != nil {
					return fail(ExitUsage, "%v", err)
				}
			}
			env, err := child.HostInfo(c.Context, f)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(s.Out)
			enc.SetIndent("", "  ")
			return enc.Encode(env)
		},
	}
}
