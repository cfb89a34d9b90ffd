package launch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/internal/testhosts"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// remoteRig is a real rdmaprobe binary and the run's certificates, for
// points whose generators run on other hosts.
type remoteRig struct {
	exe   string
	pairs certs.Pairs
}

func newRemoteRig(t *testing.T) remoteRig {
	t.Helper()
	pairs, err := certs.NewPairs()
	if err != nil {
		t.Fatal(err)
	}
	return remoteRig{exe: testhosts.Binary(t), pairs: pairs}
}

// runner is a runner.Local runner of sim points with its server on listen and
// its generators placed by l.
func (r remoteRig) runner(t *testing.T, l runner.Launcher, listen string, procs int, progress func(runner.Progress), mod func(*runner.Spec)) *runner.Local {
	t.Helper()
	spec := runner.Spec{Fabric: protocol.Fabric{Backend: "sim", GIDIndex: -1}, Mode: runner.DefaultMode, Procs: procs, Rounds: 2,
		Threshold: 1, Timeout: 10 * time.Second, InFlight: protocol.DefaultInFlight, Listen: listen,
		CalibrationWindow: -1, SampleInterval: -1, StartTimeout: 30 * time.Second}
	if mod != nil {
		mod(&spec)
	}
	loc, err := runner.NewLocal(spec, runner.LocalOptions{Exe: r.exe, Certs: r.pairs, Launcher: l, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// hostPoint is pt's share of host h.
func hostPoint(t *testing.T, pt result.Point, h string) result.HostPoint {
	t.Helper()
	for _, hp := range pt.Hosts {
		if hp.Host == h {
			return hp
		}
	}
	t.Fatalf("no figures of host %s in %+v", h, pt.Hosts)
	return result.HostPoint{}
}

// noneLeft checks that nothing but sshd runs on the hosts.
func noneLeft(t *testing.T, hosts *testhosts.SSH) {
	t.Helper()
	for _, h := range hosts.Hosts {
		left, err := testhosts.WaitNoProcs(20*time.Second, func() ([]testhosts.Proc, error) { return hosts.Programs(h) })
		if err != nil || len(left) > 0 {
			t.Errorf("left running on %s: %v %v", h, left, err)
		}
	}
}

// TestSSHLauncher runs a point with three simulated generators on two
// SSH hosts (network namespaces with their own sshd): the binary is
// copied there, each host describes itself, every client connects across
// the hosts' link, and the point has each host's share, GID and usage.
func TestSSHLauncher(t *testing.T) {
	hosts := sshHosts.Get(t)
	rig := newRemoteRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := NewSSH(ctx, SSHConfig{Hosts: []Host{{Name: "h1", Slots: 1}, {Name: "h2", Slots: 2}},
		Command: hosts.SSHCommand(), Exe: rig.exe, Fabric: protocol.Fabric{Backend: "sim", GIDIndex: -1}, Procs: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range l.Hosts() {
		gid := "::ffff:" + hosts.Addrs[i]
		if h.Name != hosts.Hosts[i] || h.Addr != hosts.Addrs[i] || !h.Copied || h.Environment == nil ||
			h.Environment.Device == nil || h.Environment.Device.Port.GID.String() != gid {
			t.Errorf("host %d: %+v (environment %+v), want %s at %s with GID %s, binary copied", i, h, h.Environment, hosts.Hosts[i], hosts.Addrs[i], gid)
		}
	}
	if l.ServerAddr() != hosts.ServerAddr {
		t.Errorf("the hosts see this machine at %q, want %s", l.ServerAddr(), hosts.ServerAddr)
	}

	r := rig.runner(t, l, hosts.ServerAddr, 3, nil, nil)
	pt, err := r.RunPoint(ctx, 90, 1)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Connected != 90 || pt.Error != "" {
		t.Fatalf("connected %d/90, error %q, outcomes %v", pt.Connected, pt.Error, pt.Outcomes)
	}
	for i, want := range []struct {
		host string
		gens []int
		n    int
	}{{"h1", []int{0}, 30}, {"h2", []int{1, 2}, 60}} {
		hp := hostPoint(t, pt, want.host)
		if len(hp.Generators) != len(want.gens) || hp.Attempted != want.n || hp.Connected != want.n || hp.SuccessRate != 1 {
			t.Errorf("%s: generators %v, %d/%d connected; want %v, %d", want.host, hp.Generators, hp.Connected, hp.Attempted, want.gens, want.n)
		}
		if hp.GID != "::ffff:"+hosts.Addrs[i] || hp.Device == "" || hp.ConnectRate <= 0 || len(hp.Usage) != len(want.gens) || len(hp.Faults) != 0 {
			t.Errorf("%s: %+v", want.host, hp)
		}
		for _, u := range hp.Usage {
			if u.PID <= 0 || u.RSS == 0 || u.FDs == 0 {
				t.Errorf("%s: generator %d's usage %+v", want.host, u.Generator, u)
			}
		}
	}
	var run result.Run
	r.Describe(&run)
	if len(run.Hosts) != 2 || run.Config.Launcher != "ssh" || run.Config.ServerAddr != hosts.ServerAddr+":0" {
		t.Errorf("run: hosts %+v, launcher %q, server %q", run.Hosts, run.Config.Launcher, run.Config.ServerAddr)
	}
	noneLeft(t, hosts)
}

// TestSSHLauncherFaults: a host that cannot be reached, a generator
// killed mid-point, an SSH connection dropped mid-point and a generator
// that hangs are each recorded against their host and classified, the
// other host's clients connect, and nothing is left running anywhere.
func TestSSHLauncherFaults(t *testing.T) {
	hosts := sshHosts.Get(t)
	rig := newRemoteRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The unreachable host is given up on after 4 s, not the launcher's
	// 10 (ssh takes an option's first value): the same fault, sooner.
	command := append(hosts.SSHCommand(), "-o", "ConnectTimeout=4")
	l, err := NewSSH(ctx, SSHConfig{Hosts: []Host{{Name: "h1", Slots: 1}, {Name: "h2", Slots: 1}},
		Command: command, Exe: rig.exe, Fabric: protocol.Fabric{Backend: "sim", GIDIndex: -1}, Procs: 2})
	if err != nil {
		t.Fatal(err)
	}
	// onProgress runs f once, when the first client's outcome is in:
	// mid-point, with the launches paced over seconds.
	onProgress := func(f func()) func(runner.Progress) {
		var once sync.Once
		return func(p runner.Progress) {
			if p.Done > 0 {
				once.Do(func() { go f() })
			}
		}
	}
	paced := func(s *runner.Spec) { s.Rate = 20 }
	// generator finds the generator process on host.
	generator := func(host string) testhosts.Proc {
		var found testhosts.Proc
		ok := eventually.Within(20*time.Second, func() bool {
			procs, _ := hosts.Programs(host)
			for _, p := range procs {
				if strings.Contains(p.Cmdline, "clients --spec") && !strings.HasPrefix(p.Cmdline, "sh ") {
					found = p
					return true
				}
			}
			return false
		})
		if !ok {
			t.Errorf("no generator found running on %s", host)
		}
		return found
	}
	check := func(t *testing.T, pt result.Point, host, class, detail string) {
		t.Helper()
		hp := hostPoint(t, pt, host)
		t.Logf("%s: %+v; point error %q", host, hp.Faults, pt.Error)
		if len(hp.Faults) != 1 || hp.Faults[0].Class != class || !strings.Contains(hp.Faults[0].Detail, detail) {
			t.Errorf("%s's faults %+v, want one %s (%q)", host, hp.Faults, class, detail)
		}
		if !strings.Contains(pt.Error, host+" "+class) {
			t.Errorf("point error %q does not name %s %s", pt.Error, host, class)
		}
		other := "h1"
		if host == "h1" {
			other = "h2"
		}
		if op := hostPoint(t, pt, other); op.Connected != op.Attempted || op.Attempted == 0 || len(op.Faults) != 0 {
			t.Errorf("the other host, %s: %d/%d connected, faults %+v", other, op.Connected, op.Attempted, op.Faults)
		}
		noneLeft(t, hosts)
	}

	t.Run("unreachable", func(t *testing.T) {
		if err := hosts.SetLink("h2", false); err != nil {
			t.Fatal(err)
		}
		r := rig.runner(t, l, hosts.ServerAddr, 2, nil, nil)
		pt, err := r.RunPoint(ctx, 40, 1)
		hosts.SetLink("h2", true)
		if err != nil {
			t.Fatal(err)
		}
		check(t, pt, "h2", result.FaultUnreachable, "")
	})

	t.Run("generator-killed", func(t *testing.T) {
		r := rig.runner(t, l, hosts.ServerAddr, 2, onProgress(func() {
			if p := generator("h2"); p.PID > 0 {
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}), paced)
		pt, err := r.RunPoint(ctx, 60, 1)
		if err != nil {
			t.Fatal(err)
		}
		check(t, pt, "h2", result.FaultDied, "killed by signal 9")
	})

	t.Run("connection-dropped", func(t *testing.T) {
		r := rig.runner(t, l, hosts.ServerAddr, 2, onProgress(func() {
			generator("h1")
			if n, err := hosts.DropSessions("h1"); n == 0 || err != nil {
				t.Errorf("dropped %d sessions: %v", n, err)
			}
		}), paced)
		pt, err := r.RunPoint(ctx, 60, 1)
		if err != nil {
			t.Fatal(err)
		}
		check(t, pt, "h1", result.FaultConnectionLost, "")
	})

	t.Run("generator-hangs", func(t *testing.T) {
		// Stopped mid-point, the generator says nothing more; the point's
		// deadline (timeout 2 s and 1 s of slack: 3.5 s of silence)
		// finds it hung, and it is killed over SSH, where it runs. The
		// other host's generator reports a client every 100 ms or so.
		r := rig.runner(t, l, hosts.ServerAddr, 2, onProgress(func() {
			if p := generator("h2"); p.PID > 0 {
				syscall.Kill(p.PID, syscall.SIGSTOP)
			}
		}), func(s *runner.Spec) { s.Rate, s.Timeout, s.GeneratorSlack = 20, 2*time.Second, time.Second })
		pt, err := r.RunPoint(ctx, 60, 1)
		if err != nil {
			t.Fatal(err)
		}
		check(t, pt, "h2", result.FaultHung, "hung")
	})
}

// TestSSHServerHost runs the server on one SSH host and the generators
// on another (--server-host): this machine only runs the probe. The
// server is stopped with SIGTERM where it runs, so its own view of the
// point comes back, and nothing is left on either host. Its CPU in the
// busy-polled traffic phase is its own reading, asked over the launcher
// (this machine cannot see its process), polling included.
func TestSSHServerHost(t *testing.T) {
	hosts := sshHosts.Get(t)
	rig := newRemoteRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fab := protocol.Fabric{Backend: "sim", GIDIndex: -1}
	srv, err := NewSSH(ctx, SSHConfig{Hosts: []Host{{Name: "h1", Slots: 1}}, Command: hosts.SSHCommand(), Exe: rig.exe, Fabric: fab, Procs: 1})
	if err != nil {
		t.Fatal(err)
	}
	gens, err := NewSSH(ctx, SSHConfig{Hosts: []Host{{Name: "h2", Slots: 2}}, Command: hosts.SSHCommand(), Exe: rig.exe, Fabric: fab, Procs: 2})
	if err != nil {
		t.Fatal(err)
	}
	spec := runner.Spec{Fabric: fab, Mode: runner.DefaultMode, Procs: 2, Rounds: 2, Threshold: 1, Timeout: 10 * time.Second,
		InFlight: protocol.DefaultInFlight, Listen: hosts.Addrs[0], CalibrationWindow: -1, SampleInterval: -1, StartTimeout: 30 * time.Second,
		Traffic: client.TrafficConfig{Duration: 300 * time.Millisecond, BusyPoll: time.Millisecond}}
	r, err := runner.NewLocal(spec, runner.LocalOptions{Exe: rig.exe, Certs: rig.pairs, Launcher: gens, ServerHost: srv})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := r.RunPoint(ctx, 40, 1)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Connected != 40 || pt.Error != "" || pt.Server.PeakActive != 40 || pt.Server.Accepted != 40 {
		t.Errorf("connected %d, error %q, the server's own view %+v", pt.Connected, pt.Error, pt.Server)
	}
	if tr := pt.Traffic; tr == nil || tr.Error != "" || tr.Messages == 0 || tr.ServerCPU <= 0 || tr.ServerSpin <= 0 {
		t.Errorf("traffic phase %+v", tr)
	} else {
		t.Logf("server CPU %.2f cores, %.2f of them polling empty CQs", tr.ServerCPU, tr.ServerSpin)
	}
	if d := r.Device(); d == nil || d.Port.GID.String() != "::ffff:"+hosts.Addrs[0] {
		t.Errorf("the server's device %+v, want its port on h1's address", d)
	}
	var run result.Run
	r.Describe(&run)
	if run.ServerHost == nil || run.ServerHost.Name != "h1" || run.Config.ServerAddr != hosts.Addrs[0]+":0" {
		t.Errorf("server host %+v, address %q", run.ServerHost, run.Config.ServerAddr)
	}
	noneLeft(t, hosts)
}

// TestPlacement fills each host's slots in turn, as mpirun does.
func TestPlacement(t *testing.T) {
	hosts := []Host{{Name: "a", Slots: 2}, {Name: "b", Slots: 1}}
	if got := placement(hosts, 5); !equalInts(got, []int{0, 0, 1, 0, 0}) {
		t.Errorf("placement %v", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSSHBinaryCache: a copy is kept on its host by content and touched
// when a run uses it again; the host's other copies go once unused for
// remoteMaxUnused, or for remoteInUse beyond the remoteKeep most recently
// used, and so does what an interrupted copy left, once unused for
// remoteInUse. (The hosts share this machine's file system, so the test
// sets the cache's place and ages its files here.)
func TestSSHBinaryCache(t *testing.T) {
	hosts := sshHosts.Get(t)
	dir := t.TempDir()
	defer func(d string) { remoteCacheDir = d }(remoteCacheDir)
	remoteCacheDir = dir
	exe := filepath.Join(t.TempDir(), "exe")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho copied\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	put := func(name string, age time.Duration) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	want := func(phase string, kept, gone []string) {
		t.Helper()
		for _, n := range kept {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				t.Errorf("%s: %s should be kept: %v", phase, n, err)
			}
		}
		for _, n := range gone {
			if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
				t.Errorf("%s: %s should be gone (%v)", phase, n, err)
			}
		}
	}
	s := &SSH{cmd: hosts.SSHCommand()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	put("rdmaprobe-00000000000000a1", remoteMaxUnused+time.Hour) // unused for a day: goes
	put("rdmaprobe-00000000000000b2", 2*remoteInUse)             // among the most recent: stays
	put("rdmaprobe-00000000000000c3.4242", 2*remoteInUse)        // an interrupted copy's: goes
	put("rdmaprobe-00000000000000d4.4243", time.Minute)          // a copy under way: stays
	put("initramfs-0123.cpio", remoteMaxUnused+time.Hour)        // not a copy: stays
	path, err := s.copyBinary(ctx, hosts.Hosts[0], exe)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := hosts.Command(ctx, hosts.Hosts[0], path).Output(); err != nil || string(out) != "copied\n" {
		t.Fatalf("the copy %s ran: %q, %v", path, out, err)
	}
	want("first copy", []string{filepath.Base(path), "rdmaprobe-00000000000000b2", "rdmaprobe-00000000000000d4.4243", "initramfs-0123.cpio"},
		[]string{"rdmaprobe-00000000000000a1", "rdmaprobe-00000000000000c3.4242"})

	// The copy was last used 3 hours ago; since then remoteKeep+1 others
	// were used within the hour, which puts b2 beyond the remoteKeep most
	// recently used.
	old := now.Add(-3 * remoteInUse)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	var recent []string
	for i := 0; i <= remoteKeep; i++ {
		n := fmt.Sprintf("rdmaprobe-1%015x", i)
		put(n, remoteInUse/2)
		recent = append(recent, n)
	}
	again, err := s.copyBinary(ctx, hosts.Hosts[0], exe)
	if err != nil || again != path {
		t.Fatalf("second copy: %q, %v; want %s again", again, err, path)
	}
	fi, err := os.Stat(path)
	if err != nil || time.Since(fi.ModTime()) > time.Minute {
		t.Errorf("the copy used again was not touched: %v, %v", fi, err)
	}
	want("used again", append(recent, filepath.Base(path)), []string{"rdmaprobe-00000000000000b2"})
}

// TestSSHPrepareLogins: preparing a host takes two logins when it keeps
// this binary's copy from an earlier run (its system, address and copy
// in one, hostinfo in the other), and three when it has none (the copy
// between them). A counting wrapper stands in for the ssh command.
func TestSSHPrepareLogins(t *testing.T) {
	hosts := sshHosts.Get(t)
	exe := testhosts.Binary(t)
	defer func(d string) { remoteCacheDir = d }(remoteCacheDir)
	remoteCacheDir = t.TempDir()
	logins := filepath.Join(t.TempDir(), "logins")
	cmd := append([]string{"sh", "-c", `echo >>"$0"; exec ssh "$@"`, logins}, hosts.SSHCommand()[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, want := range []struct {
		copy   string
		logins int
	}{{"none on the host", 3}, {"the one copied before", 2}} {
		os.Remove(logins)
		l, err := NewSSH(ctx, SSHConfig{Hosts: []Host{{Name: hosts.Hosts[0], Slots: 1}}, Command: cmd, Exe: exe,
			Fabric: protocol.Fabric{Backend: "sim", GIDIndex: -1}, Procs: 1})
		if err != nil {
			t.Fatalf("%s: %v", want.copy, err)
		}
		b, _ := os.ReadFile(logins)
		h := l.Hosts()[0]
		if n := strings.Count(string(b), "\n"); n != want.logins || !h.Copied || h.Environment == nil {
			t.Errorf("%s: %d logins, host %+v; want %d logins, the binary copied, an environment", want.copy, n, h, want.logins)
		}
		if out, err := hosts.Command(ctx, hosts.Hosts[0], h.Exe, "--version").Output(); err != nil {
			t.Errorf("%s: %s --version on the host: %v %s", want.copy, h.Exe, err, out)
		}
	}
}
