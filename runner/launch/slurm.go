package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// SlurmConfig configures the Slurm launcher.
type SlurmConfig struct {
	// Hosts are the nodes and their slots; nil takes the allocation's
	// (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE).
	Hosts []Host
	// Command is srun's command line, default ["srun"].
	Command []string
	// Exe is the rdmaprobe the nodes run when a host names none: this
	// binary's path, as on a cluster's shared file system.
	Exe string
	// Fabric is what the generators open, for the hosts' descriptions.
	Fabric protocol.Fabric
	// Procs is the number of generator processes placed on the nodes.
	Procs int
	// ServerIP is the server's address: a node's simulated port takes
	// the node's address towards it (protocol.Fabric.Toward).
	ServerIP string
	// Out, if set, is told what the preparation found.
	Out io.Writer
}

// Slurm starts load generators as job steps of the current allocation,
// as OSU's benchmarks run under srun: one step of one task per
// generator, pinned to its node, overlapping the others (--overlap), its
// events coming back on srun's stdout and its spec and release going
// out on srun's stdin.
type Slurm struct {
	cmd   []string
	hosts []*slurmNode
	place []int
}

type slurmNode struct {
	Host
	exe string
	// addr is the node's address towards the server, as its simulated
	// port had it; "" on a real device.
	addr string
	env  *result.Environment
}

// NewSlurm prepares the nodes: inside an allocation only, each must run
// rdmaprobe (`hostinfo`, one step per node), which describes it.
func NewSlurm(ctx context.Context, cfg SlurmConfig) (*Slurm, error) {
	if os.Getenv("SLURM_JOB_ID") == "" {
		return nil, fmt.Errorf("slurm launcher: not inside a Slurm allocation (SLURM_JOB_ID is unset): run rdmaprobe under salloc or sbatch")
	}
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"srun"}
	}
	if _, err := exec.LookPath(cfg.Command[0]); err != nil {
		return nil, fmt.Errorf("slurm launcher: %s not found: install slurm-client", cfg.Command[0])
	}
	hosts := cfg.Hosts
	if hosts == nil {
		var err error
		if hosts, err = allocationNodes(os.Getenv("SLURM_JOB_NODELIST"), os.Getenv("SLURM_TASKS_PER_NODE")); err != nil {
			return nil, fmt.Errorf("slurm launcher: %w", err)
		}
	}
	s := &Slurm{cmd: cfg.Command, place: placement(hosts, max(cfg.Procs, 1))}
	for _, h := range hosts {
		n := &slurmNode{Host: h, exe: h.Exe}
		if n.exe == "" {
			n.exe = cfg.Exe
		}
		s.hosts = append(s.hosts, n)
	}
	errs := make([]error, len(s.hosts))
	var wg sync.WaitGroup
	for i, n := range s.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.prepare(ctx, n, cfg.Fabric, cfg.ServerIP)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if cfg.Out != nil {
		for _, n := range s.hosts {
			fmt.Fprintf(cfg.Out, "node %s: %d slot(s), %s\n", n.Name, n.Slots, n.exe)
		}
	}
	return s, nil
}

func (s *Slurm) prepare(ctx context.Context, n *slurmNode, f protocol.Fabric, serverIP string) error {
	f = f.Generators()
	f.Toward = serverIP
	spec, _ := json.Marshal(f)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cmd[0], s.args(n.Name, n.exe, "hostinfo", "--spec", "-")...)
	cmd.Stdin = bytes.NewReader(append(spec, '\n'))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("node %s: %s hostinfo: %s (%v)", n.Name, n.exe, orDefault(command.LastLinesJoined(stderr.String(), 2, "; "), "no output"), err)
	}
	var env result.Environment
	if err := json.Unmarshal(stdout.Bytes(), &env); err != nil {
		return fmt.Errorf("node %s: %s hostinfo said %q: %v", n.Name, n.exe, firstLine(stdout.String()), err)
	}
	n.env = &env
	if d := env.Device; d != nil && f.Backend == "sim" {
		n.addr = netip.AddrFrom16(d.Port.GID).Unmap().String()
	}
	return nil
}

// args are srun's arguments for one step of one task on node.
func (s *Slurm) args(node string, argv ...string) []string {
	return append(append(append([]string(nil), s.cmd[1:]...),
		"--nodes=1", "--ntasks=1", "--nodelist="+node, "--overlap", "--quiet", "--"), argv...)
}

// Command runs generator i as a step on its node, inside the wrapper
// that reports the generator's exit status (see SSH.Command).
func (s *Slurm) Command(i int, args, env []string) (*exec.Cmd, error) {
	n := s.hosts[s.place[i]]
	return exec.Command(s.cmd[0], s.args(n.Name, wrapped(n.exe, args, env)...)...), nil
}

// Host is generator i's node.
func (s *Slurm) Host(i int) string { return s.hosts[s.place[i]].Name }

// Addr is generator i's node's address, if its name resolves here.
func (s *Slurm) Addr(i int) string { return s.hosts[s.place[i]].addr }

// Name is "slurm".
func (s *Slurm) Name() string { return "slurm" }

// Hosts describes the nodes for the run record.
func (s *Slurm) Hosts() []result.Host {
	var out []result.Host
	for _, n := range s.hosts {
		out = append(out, result.Host{Name: n.Name, Launcher: "slurm", Slots: n.Slots, Addr: n.addr,
			Exe: n.exe, Environment: n.env})
	}
	return out
}

// Kill kills pid on generator i's node, in a step of its own.
func (s *Slurm) Kill(i, pid int) { s.Signal(i, pid, "KILL") }

// Signal sends sig to pid on generator i's node, in a step of its own.
func (s *Slurm) Signal(i, pid int, sig string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	exec.CommandContext(ctx, s.cmd[0], s.args(s.Host(i), "kill", "-"+sig, strconv.Itoa(pid))...).Run()
}

// Fault classifies how generator i's step ended before the generator
// reported: the wrapper's exit event is the task's own exit; without
// one, srun could not launch the task, or lost it.
func (s *Slurm) Fault(i int, e runner.Ended) (string, string) {
	switch {
	case e.Exit != nil:
		return result.FaultDied, exitDetail(*e.Exit, e.Stderr)
	case !e.Started:
		return result.FaultUnreachable, orDefault(e.Stderr, fmt.Sprintf("srun exited %d before the generator started", e.Code))
	}
	return result.FaultConnectionLost, orDefault(e.Stderr, fmt.Sprintf("srun exited %d and the task's exit was not seen", e.Code))
}

// AllocationHosts are the current allocation's nodes, with their task
// counts as slots.
func AllocationHosts() ([]Host, error) {
	if os.Getenv("SLURM_JOB_ID") == "" {
		return nil, fmt.Errorf("not inside a Slurm allocation (SLURM_JOB_ID is unset): run rdmaprobe under salloc or sbatch")
	}
	return allocationNodes(os.Getenv("SLURM_JOB_NODELIST"), os.Getenv("SLURM_TASKS_PER_NODE"))
}

// allocationNodes are the allocation's nodes with their task counts as
// slots.
func allocationNodes(nodelist, tasksPerNode string) ([]Host, error) {
	if nodelist == "" {
		return nil, fmt.Errorf("SLURM_JOB_NODELIST is unset")
	}
	names, err := expandHostlist(nodelist)
	if err != nil {
		return nil, err
	}
	slots, err := expandTasksPerNode(tasksPerNode, len(names))
	if err != nil {
		return nil, err
	}
	hosts := make([]Host, len(names))
	for i, n := range names {
		hosts[i] = Host{Name: n, Slots: slots[i]}
	}
	return hosts, nil
}

// expandHostlist expands Slurm's hostlist syntax: "node[01-03,7],login1"
// is node01, node02, node03, node7, login1.
func expandHostlist(list string) ([]string, error) {
	var out []string
	for len(list) > 0 {
		// One item: up to a comma outside brackets.
		depth, end := 0, len(list)
		for i, r := range list {
			if r == '[' {
				depth++
			} else if r == ']' {
				depth--
			} else if r == ',' && depth == 0 {
				end = i
				break
			}
		}
		item := list[:end]
		list = strings.TrimPrefix(list[end:], ",")
		open := strings.IndexByte(item, '[')
		if open < 0 {
			if item != "" {
				out = append(out, item)
			}
			continue
		}
		close := strings.IndexByte(item, ']')
		if close < open {
			return nil, fmt.Errorf("hostlist %q: unbalanced brackets", item)
		}
		prefix, suffix := item[:open], item[close+1:]
		for _, r := range strings.Split(item[open+1:close], ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || b < a {
				return nil, fmt.Errorf("hostlist %q: bad range %q", item, r)
			}
			for k := a; k <= b; k++ {
				out = append(out, fmt.Sprintf("%s%0*d%s", prefix, len(lo), k, suffix))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("hostlist %q names no node", list)
	}
	return out, nil
}

// expandTasksPerNode expands SLURM_TASKS_PER_NODE ("2(x3),1") to one
// count per node; unset gives each node one.
func expandTasksPerNode(s string, nodes int) ([]int, error) {
	var out []int
	if s == "" {
		for range nodes {
			out = append(out, 1)
		}
		return out, nil
	}
	for _, f := range strings.Split(s, ",") {
		count, rep := f, "1"
		if i := strings.Index(f, "(x"); i >= 0 && strings.HasSuffix(f, ")") {
			count, rep = f[:i], f[i+2:len(f)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || c < 1 || r < 1 {
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE %q: cannot read %q", s, f)
		}
		for range r {
			out = append(out, c)
		}
	}
	if len(out) != nodes {
		return nil, fmt.Errorf("SLURM_TASKS_PER_NODE %q gives %d nodes, the node list %d", s, len(out), nodes)
	}
	return out, nil
}
