package runner

import (
	"os/exec"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Launcher places load generators: it makes the command that runs one
// generator's process, `rdmaprobe clients --spec -`, wherever that
// generator runs. The process reads its protocol.GeneratorSpec and then its
// release from stdin and writes events on stdout (protocol.Event), so over any
// pipe, a remote shell's or a job launcher's included, it is the same
// child. launch_local.go starts it on this machine; another placement is
// another Launcher in a file of its own.
type Launcher interface {
	// Command returns the command of generator i: rdmaprobe with args,
	// and env (KEY=VALUE) added to its environment. The runner starts
	// it, owns its pipes and reaps it.
	Command(i int, args, env []string) (*exec.Cmd, error)
	// Host names where generator i runs; "" is this machine, whose
	// generator processes the collectors sample.
	Host(i int) string
}

// RemoteLauncher is a Launcher that places generators on other hosts
// (package launch: SSH, Slurm). The runner then also asks it each
// generator's host address, kills a generator there over the launcher
// when it must, classifies how one failed, and records the hosts.
type RemoteLauncher interface {
	Launcher
	// Name is the launcher's name in the run record: "ssh", "slurm".
	Name() string
	// Hosts describes the hosts, for the run record.
	Hosts() []result.Host
	// Addr is the address of generator i's host, what a simulated
	// port there listens on ("" = 127.0.0.1).
	Addr(i int) string
	// Kill ends process pid on generator i's host, over the launcher;
	// it returns once the launcher is done trying.
	Kill(i, pid int)
	// Signal sends signal sig ("TERM") to process pid on generator i's
	// host, over the launcher.
	Signal(i, pid int, sig string)
	// Fault classifies how generator i's command ended before the
	// generator reported: one of result's Fault* classes, with detail.
	Fault(i int, e Ended) (class, detail string)
}
