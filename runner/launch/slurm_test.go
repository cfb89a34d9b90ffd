package launch

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/internal/testhosts"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// allocate makes an allocation of tasks on the test cluster and sets
// the environment srun and the launcher read inside one, as salloc
// would for its shell; the allocation is given back at the end.
func allocate(t *testing.T, c *testhosts.Slurm, tasks int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Command(ctx, "salloc", "--no-shell", "-N1", "-n", strconv.Itoa(tasks)).CombinedOutput()
	m := regexp.MustCompile(`Granted job allocation (\d+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("salloc: %v %s", err, out)
	}
	id := string(m[1])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := c.Command(ctx, "scancel", id).CombinedOutput(); err != nil {
			t.Errorf("scancel %s: %v %s", id, err, out)
		}
	})
	t.Setenv("SLURM_JOB_ID", id)
	t.Setenv("SLURM_JOB_NODELIST", c.Node)
	t.Setenv("SLURM_TASKS_PER_NODE", strconv.Itoa(tasks))
}

// TestSlurmLauncher runs a point's generators as job steps of an
// allocation on a one-node Slurm cluster (munge, slurmctld, slurmd),
// one task per generator, with the node list from the allocation; a
// task that dies mid-point is recorded and classified; an rdmaprobe the
// node cannot run stops the run before any point; nothing is left in
// the cluster.
func TestSlurmLauncher(t *testing.T) {
	c := testhosts.StartSlurm(t)
	rig := newRemoteRig(t)
	allocate(t, c, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srun := append(c.Prefix(), "srun")
	fab := protocol.Fabric{Backend: "sim", GIDIndex: -1}
	l, err := NewSlurm(ctx, SlurmConfig{Command: srun, Exe: rig.exe, Fabric: fab, Procs: 4, ServerIP: c.ServerAddr})
	if err != nil {
		t.Fatal(err)
	}
	hs := l.Hosts()
	gid := "::ffff:" + c.NodeAddr
	if len(hs) != 1 || hs[0].Name != c.Node || hs[0].Slots != 4 || hs[0].Environment == nil || hs[0].Environment.Device.Port.GID.String() != gid {
		t.Fatalf("nodes %+v, want %s with 4 slots and GID %s", hs, c.Node, gid)
	}
	noneLeft := func() {
		t.Helper()
		if left, err := testhosts.WaitNoProcs(20*time.Second, c.Procs); err != nil || len(left) > 0 {
			t.Errorf("left running in the cluster: %v %v", left, err)
		}
	}

	t.Run("point", func(t *testing.T) {
		r := rig.runner(t, l, c.ServerAddr, 4, nil, nil)
		pt, err := r.RunPoint(ctx, 80, 1)
		if err != nil {
			t.Fatal(err)
		}
		hp := hostPoint(t, pt, c.Node)
		if pt.Connected != 80 || pt.Error != "" || len(hp.Generators) != 4 || hp.Connected != 80 || hp.GID != gid || len(hp.Usage) != 4 {
			t.Errorf("connected %d, error %q, %s: %+v", pt.Connected, pt.Error, c.Node, hp)
		}
		var run result.Run
		r.Describe(&run)
		if run.Config.Launcher != "slurm" || len(run.Hosts) != 1 {
			t.Errorf("run: launcher %q, hosts %+v", run.Config.Launcher, run.Hosts)
		}
		noneLeft()
	})

	t.Run("task-killed", func(t *testing.T) {
		var once sync.Once
		r := rig.runner(t, l, c.ServerAddr, 2, func(p runner.Progress) {
			if p.Done == 0 {
				return
			}
			once.Do(func() {
				go func() {
					eventually.True(t, 20*time.Second, "a generator task running", func() bool {
						procs, _ := c.Procs()
						for _, p := range procs {
							// The generator, not srun (whose command line
							// names it too) nor the wrapper.
							if p.Comm == "rdmaprobe" && strings.Contains(p.Cmdline, "clients --spec") {
								return syscall.Kill(p.PID, syscall.SIGKILL) == nil
							}
						}
						return false
					})
				}()
			})
		}, func(s *runner.Spec) { s.Rate = 20 })
		pt, err := r.RunPoint(ctx, 60, 1)
		if err != nil {
			t.Fatal(err)
		}
		hp := hostPoint(t, pt, c.Node)
		t.Logf("faults %+v; point error %q", hp.Faults, pt.Error)
		if len(hp.Faults) != 1 || hp.Faults[0].Class != result.FaultDied || !strings.Contains(hp.Faults[0].Detail, "killed by signal 9") {
			t.Errorf("faults %+v, want the killed task as died", hp.Faults)
		}
		if pt.Connected == 0 || pt.Connected == 60 {
			t.Errorf("connected %d of 60: want the other task's clients and not the killed one's", pt.Connected)
		}
		noneLeft()
	})

	t.Run("no-binary", func(t *testing.T) {
		_, err := NewSlurm(ctx, SlurmConfig{Command: srun, Exe: "/nonexistent/rdmaprobe", Fabric: fab, Procs: 1, ServerIP: c.ServerAddr})
		if err == nil || !strings.Contains(err.Error(), "node "+c.Node) || !strings.Contains(err.Error(), "/nonexistent/rdmaprobe") {
			t.Errorf("an rdmaprobe the node cannot run: %v", err)
		}
		noneLeft()
	})
}
