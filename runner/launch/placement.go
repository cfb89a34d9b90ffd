package launch

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/rdmaprobe/rdmaprobe/runner"
)

// Placement is where a run's load generators start, and its server when
// it is not this host's (--hosts, --hostfile, --launcher, --ssh, --srun,
// --server-host).
type Placement struct {
	// Launcher is "ssh" or "slurm"; "" is ssh when there are hosts.
	Launcher string
	// Hosts (host[:slots],...) or Hostfile names the hosts; with neither,
	// the slurm launcher takes its allocation's nodes.
	Hosts, Hostfile string
	// SSH and Srun are the command lines of the two launchers.
	SSH, Srun []string
	// ServerHost runs rdmaprobe's own server there, over SSH.
	ServerHost string

	hosts []Host
}

// Resolve checks p against the run's spec and reads its hosts. It
// returns false when everything runs on this host.
func (p *Placement) Resolve(spec runner.Spec) (bool, error) {
	switch {
	case p.ServerHost != "" && spec.Server != nil:
		return false, fmt.Errorf("--server-host runs rdmaprobe's own server: not with --server-cmd")
	case p.ServerHost != "" && spec.Listen == "":
		return false, fmt.Errorf("--server-host needs --server-addr, an address of that host the clients reach")
	case p.Hosts != "" && p.Hostfile != "":
		return false, fmt.Errorf("--hosts and --hostfile: give one")
	}
	var err error
	switch {
	case p.Hosts != "":
		p.hosts, err = ParseHosts(p.Hosts)
	case p.Hostfile != "":
		p.hosts, err = ReadHostfile(p.Hostfile)
	}
	if err != nil {
		return false, err
	}
	switch p.Launcher {
	case "":
		switch {
		case p.hosts != nil:
			p.Launcher = "ssh"
		case p.ServerHost == "":
			return false, nil
		}
	case "ssh":
		if p.hosts == nil {
			return false, fmt.Errorf("--launcher ssh needs --hosts or --hostfile")
		}
	case "slurm":
		if p.hosts == nil {
			if p.hosts, err = AllocationHosts(); err != nil {
				return false, fmt.Errorf("--launcher slurm: %w", err)
			}
		}
	default:
		return false, fmt.Errorf("--launcher %q: want ssh or slurm", p.Launcher)
	}
	if len(p.SSH) == 0 || len(p.Srun) == 0 {
		return false, fmt.Errorf("--ssh and --srun must name a command")
	}
	return true, nil
}

// Slots are the generator slots of p's hosts (0 without hosts): one
// generator per slot, as mpirun starts one rank per slot.
func (p *Placement) Slots() int {
	if p.hosts == nil {
		return 0
	}
	return Slots(p.hosts)
}

// Open makes the launchers of a resolved placement for a run whose
// server and generators start from exe: of the generators (nil: this
// machine), and of the server (nil: this machine). It sets spec.Listen
// to the address the first SSH host sees this one at when none was
// given.
func (p *Placement) Open(ctx context.Context, spec *runner.Spec, exe string, out io.Writer) (runner.Launcher, runner.RemoteLauncher, error) {
	var server runner.RemoteLauncher
	if p.ServerHost != "" {
		s, err := NewSSH(ctx, SSHConfig{Hosts: []Host{{Name: p.ServerHost, Slots: 1}},
			Command: p.SSH, Exe: exe, Fabric: spec.Fabric, Procs: 1, Out: out})
		if err != nil {
			return nil, nil, fmt.Errorf("--server-host: %w", err)
		}
		server = s
	}
	l, err := p.generators(ctx, spec, exe, out)
	return l, server, err
}

// generators makes the generators' launcher (nil: this machine).
func (p *Placement) generators(ctx context.Context, spec *runner.Spec, exe string, out io.Writer) (runner.Launcher, error) {
	switch p.Launcher {
	case "":
		return nil, nil
	case "slurm":
		if spec.Listen == "" {
			return nil, fmt.Errorf("--launcher slurm: give --server-addr, an address of this host the nodes reach")
		}
		ip, _, _ := net.SplitHostPort(spec.Listen)
		l, err := NewSlurm(ctx, SlurmConfig{Hosts: p.hosts, Command: p.Srun, Exe: exe,
			Fabric: spec.Fabric, Procs: spec.Procs, ServerIP: ip, Out: out})
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	l, err := NewSSH(ctx, SSHConfig{Hosts: p.hosts, Command: p.SSH, Exe: exe,
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
