package app

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/launch"
)

// remoteFlags place the load generators on other hosts.
func remoteFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "hosts", Usage: "run the load generators on these hosts: comma-separated host[:slots] (SSH destinations, your ssh_config applies; Slurm nodes with --launcher slurm); --procs defaults to their slots"},
		&cli.StringFlag{Name: "hostfile", Usage: "the hosts, one per line: name [slots=N] [exe=PATH] (mpirun-style; exe is rdmaprobe there, default: this binary, copied over SSH when the OS and architecture match)"},
		&cli.StringFlag{Name: "launcher", Usage: "how generators start on the hosts: ssh (default with --hosts) or slurm (srun inside the current allocation; hosts default to its nodes)"},
		&cli.StringFlag{Name: "ssh", Value: "ssh", Usage: "the ssh command line of the SSH launcher, e.g. \"ssh -F lab/ssh_config\" (BatchMode: keys or an agent, no passwords)"},
		&cli.StringFlag{Name: "srun", Value: "srun", Usage: "the srun command line of the Slurm launcher"},
		&cli.StringFlag{Name: "server-host", Usage: "run rdmaprobe's own server on this SSH host instead of here (with --server-addr: an address of that host the clients reach); this machine then only runs the probe"},
	}
}

// placement is where the placement flags put spec's generators (and
// server); nil means this host.
func placement(c *cli.Context, spec runner.Spec) (*launch.Placement, error) {
	p := &launch.Placement{Launcher: c.String("launcher"), Hosts: c.String("hosts"), Hostfile: c.String("hostfile"),
		SSH: strings.Fields(c.String("ssh")), Srun: strings.Fields(c.String("srun")), ServerHost: c.String("server-host")}
	if ok, err := p.Resolve(spec); !ok {
		return nil, err
	}
	return p, nil
}

// listenSpec sets where rdmaprobe's own server listens from
// --server-addr (a --server-cmd server listens where its command says).
func listenSpec(c *cli.Context, spec *runner.Spec) error {
	a := c.String("server-addr")
	if a == "" || spec.Server != nil {
		return nil
	}
	var err error
	spec.Listen, err = serverAddr(a)
	return err
}

// serverAddr checks --server-addr: an address of this host, with an
// optional port; a name is resolved here.
func serverAddr(a string) (string, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		host, port = strings.Trim(a, "[]"), "0"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		addrs, lerr := net.LookupHost(host)
		if lerr != nil || len(addrs) == 0 {
			return "", fmt.Errorf("--server-addr %q: not an address, and the name does not resolve", a)
		}
		if ip, err = netip.ParseAddr(addrs[0]); err != nil {
			return "", fmt.Errorf("--server-addr %q resolves to %q", a, addrs[0])
		}
	}
	if ip.IsUnspecified() {
		return "", fmt.Errorf("--server-addr %q: the generators need the address they dial, not %s", a, ip)
	}
	return net.JoinHostPort(ip.String(), port), nil
}
