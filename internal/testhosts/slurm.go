package testhosts

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Slurm is a one-node Slurm cluster (scripts/testslurm.sh): munged,
// slurmctld and slurmd in a network namespace whose only peer is itself.
// Slurm's commands reach it through Command.
type Slurm struct {
	// Dir holds the configuration, munge key, state and logs.
	Dir string
	// Conf is the slurm.conf (SLURM_CONF).
	Conf string
	// NetNS is the namespace the cluster runs in.
	NetNS string
	// Node is the node's name; CPUs is what it offers.
	Node string
	CPUs int
	// ServerAddr is this machine's address on its link to the cluster's
	// namespace, what tasks on the node reach; NodeAddr is the node's.
	ServerAddr, NodeAddr string
}

// StartSlurm starts the cluster for the test; its clean-up stops it.
func StartSlurm(t testing.TB) *Slurm {
	t.Helper()
	need(t, "Slurm test cluster", "ip", "munged", "slurmctld", "slurmd", "srun", "salloc", "sinfo", "flock", "realpath")
	dir := t.TempDir()
	envFile := startScript(t, 2*time.Minute, "testslurm.sh", dir)
	env, err := readEnv(envFile)
	if err != nil {
		t.Fatal(err)
	}
	cpus, _ := strconv.Atoi(env["CPUS"])
	c := &Slurm{Dir: dir, Conf: env["SLURM_CONF"], NetNS: env["NS"], Node: env["NODE"], CPUs: cpus,
		ServerAddr: env["SERVER_ADDR"], NodeAddr: env["NODE_ADDR"]}
	if c.Conf == "" || c.NetNS == "" || c.Node == "" || cpus < 1 || c.ServerAddr == "" {
		t.Fatalf("testslurm.sh wrote %v", env)
	}
	return c
}

// Prefix is what runs a command against the cluster: inside its
// namespace, with its SLURM_CONF. A launcher's srun is Prefix + srun.
func (c *Slurm) Prefix() []string {
	return []string{"ip", "netns", "exec", c.NetNS, "env", "SLURM_CONF=" + c.Conf}
}

// Command runs argv (salloc, srun, sinfo, ...) against the cluster.
func (c *Slurm) Command(ctx context.Context, argv ...string) *exec.Cmd {
	p := c.Prefix()
	cmd := exec.CommandContext(ctx, p[0], append(p[1:], argv...)...)
	cmd.Env = os.Environ()
	return cmd
}

// Procs lists what runs in the cluster besides its daemons: job steps
// (slurmstepd) and their tasks.
func (c *Slurm) Procs() ([]Proc, error) {
	return netnsProcs(c.NetNS, func(p Proc) bool {
		switch p.Comm {
		case "munged", "slurmctld", "slurmd", "slurmscriptd":
			return true
		}
		return false
	})
}
