package app

import (
	"context"
	"fmt"
	"io"
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

// remote is where the flags place the load generators: nil for this
// host.
type remote struct {
	launcher  string
	hosts     []launch.Host
	ssh, srun []string
	// serverHost runs the server over SSH on that host.
	serverHost string
}

// remotePlacement reads the placement flags; nil means this host.
func remotePlacement(c *cli.Context) (*remote, error) {
	r := &remote{launcher: c.String("launcher"), ssh: strings.Fields(c.String("ssh")), srun: strings.Fields(c.String("srun")),
		serverHost: c.String("server-host")}
	if r.serverHost != "" && !c.IsSet("server-addr") {
		return nil, fmt.Errorf("--server-host needs --server-addr, an address of that host the clients reach")
	}
	if r.serverHost != "" && c.IsSet("server-cmd") {
		return nil, fmt.Errorf("--server-host runs rdmaprobe's own server: not with --server-cmd")
	}
	var err error
	switch {
	case c.IsSet("hosts") && c.IsSet("hostfile"):
		return nil, fmt.Errorf("--hosts and --hostfile: give one")
	case c.IsSet("hosts"):
		r.hosts, err = launch.ParseHosts(c.String("hosts"))
	case c.IsSet("hostfile"):
		r.hosts, err = launch.ReadHostfile(c.String("hostfile"))
	}
	if err != nil {
		return nil, err
	}
	switch r.launcher {
	case "":
		switch {
		case r.hosts != nil:
			r.launcher = "ssh"
		case r.serverHost == "":
			return nil, nil
		}
	case "ssh":
		if r.hosts == nil {
			return nil, fmt.Errorf("--launcher ssh needs --hosts or --hostfile")
		}
	case "slurm":
		if r.hosts == nil {
			if r.hosts, err = launch.AllocationHosts(); err != nil {
				return nil, fmt.Errorf("--launcher slurm: %w", err)
			}
		}
	default:
		return nil, fmt.Errorf("--launcher %q: want ssh or slurm", r.launcher)
	}
	if len(r.ssh) == 0 || len(r.srun) == 0 {
		return nil, fmt.Errorf("--ssh and --srun must name a command")
	}
	return r, nil
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

// open makes the launchers for a run whose server and generators start
// from exe: of the generators (nil: this machine), and of the server
// (nil: this machine).
func (r *remote) open(ctx context.Context, spec *runner.Spec, exe string, out io.Writer) (runner.Launcher, runner.RemoteLauncher, error) {
	var server runner.RemoteLauncher
	if r.serverHost != "" {
		s, err := launch.NewSSH(ctx, launch.SSHConfig{Hosts: []launch.Host{{Name: r.serverHost, Slots: 1}},
			Command: r.ssh, Exe: exe, Fabric: spec.Fabric, Procs: 1, Out: out})
		if err != nil {
			return nil, nil, fmt.Errorf("--server-host: %w", err)
		}
		server = s
	}
	l, err := r.generators(ctx, spec, exe, out)
	return l, server, err
}

// generators makes the generators' launcher (nil: this machine).
func (r *remote) generators(ctx context.Context, spec *runner.Spec, exe string, out io.Writer) (runner.Launcher, error) {
	switch r.launcher {
	case "":
		return nil, nil
	case "slurm":
		if spec.Listen == "" {
			return nil, fmt.Errorf("--launcher slurm: give --server-addr, an address of this host the nodes reach")
		}
		ip, _, _ := net.SplitHostPort(spec.Listen)
		l, err := launch.NewSlurm(ctx, launch.SlurmConfig{Hosts: r.hosts, Command: r.srun, Exe: exe,
			Fabric: spec.Fabric, Procs: spec.Procs, ServerIP: ip, Out: out})
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	l, err := launch.NewSSH(ctx, launch.SSHConfig{Hosts: r.hosts, Command: r.ssh, Exe: exe,
		Fabric: spec.Fabric, Procs: spec.Procs, Out: out})
	if err != nil {
		return nil, err
	}
	if spec.Listen == "" && spec.Server == nil {
		if spec.Listen = l.ServerAddr(); spec.Listen == "" {
			return nil, fmt.Errorf("the first host did not say which address it sees this host at: give --server-addr")
		}
	}
	return l, nil
}
