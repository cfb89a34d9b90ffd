package app

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
)

func needTool(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		parts.Missing(t, "%s not installed (Debian package %s; scripts/setup.sh installs it)", tool, pkg)
	}
	return p
}

// rping, a server this project did not write, probed on Soft-RoCE in the
// guest with its own client: 4 held clients (each pings until released),
// the server's QPs counted by the kernel for its process.
//
// Guest, shared netdev: rping needs rdma_cm on rxe, and the kernel counts its QPs.
func TestVMTargetRping(t *testing.T) {
	needVM(t)
	rping := needTool(t, "rping", "rdmacm-utils")
	root := t.TempDir()
	// rping prints with stdio, which a pipe buffers by 4 KiB: with its
	// default 64-byte pings a client's first "ping data" line reaches
	// the runner only after ~50 pings, late on a loaded host (two of
	// two clients timed out at 90 s in one CI run). 4 KiB pings make
	// every line fill the buffer, so each is seen as it is printed.
	// One client is launched at a time, the next once the last printed
	// its ping (--inflight 1): Debian 12's rping (rdma-core 44) has a
	// race in its persistent server (-P), fixed upstream in v57 by
	// 6f8e0056e: connect requests that arrive before its main thread
	// takes the previous one overwrite it, so one request is accepted
	// twice ("rdma_accept: Invalid argument", the other client waits out
	// its deadline). Two clients launched at once hit it in one CI run;
	// the test is about probing rping, not about that race.
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "4", "--inflight", "1", "--calibrate", "0", "--timeout", "3m",
		"--vm-mem", "2048", "--vm-no-reference", "--results", root,
		"--server-cmd", "rping -s -P -S 4096 -a {addr} -p {port}",
		"--client-cmd", "rping -c -S 4096 -a {addr} -p {port} -C 1000000 -v", "--client-ok", `^ping data: rdma-ping-0`)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	run := loadOnlyRun(t, root)
	if !strings.Contains(run.Backend.Description, "rxe1 on dummy0") {
		t.Errorf("backend %q", run.Backend.Description)
	}
	if tg := run.Target; tg == nil || tg.Binaries[rping] == "" || tg.Counting != "held" || tg.Device != "rxe1" || tg.Addr != "192.0.2.1" {
		t.Errorf("run target %+v", run.Target)
	}
	for _, p := range run.Points {
		if !p.Passed || p.Connected != p.Clients {
			t.Errorf("%d clients: %d connected, outcomes %v, error %q", p.Clients, p.Connected, p.Outcomes, p.Error)
			for _, r := range p.Records {
				if r.Outcome != result.OutcomeOK && r.Command != nil {
					t.Logf("client %d %s: %s\n%s", r.ID, r.Outcome, r.Error, r.Command.Tail)
				}
			}
			if p.Target != nil {
				t.Logf("server: exit %q\n%s", p.Target.Exit, p.Target.Tail)
			}
			continue
		}
		srv, cl := p.Peak.ByRole["server"], p.Peak.ByRole["clients"]
		if srv["qp"] != p.Clients || srv["cq"] < p.Clients || cl["qp"] != p.Clients {
			t.Errorf("%d clients: kernel objects by role %v", p.Clients, p.Peak.ByRole)
		}
		if p.Target == nil || p.Target.Exit != "killed by SIGTERM" || len(p.Target.Left) > 0 {
			t.Errorf("%d clients: server %+v", p.Clients, p.Target)
		}
	}
	noChildren(t)
}

// rdma-core's ibv_rc_pingpong, unmodified, with no -d (it opens the
// first device) and GID index 0, as server and client command: in the
// guest each sees the netdev device alone, so the pair connects (on
// rxe0, the first device otherwise, RTR fails at GID 0). The server
// serves its one client and exits 0: its work, not a death.
//
// Guest, shared netdev: device order and GID 0 exist only on rxe.
func TestVMTargetFirstDevice(t *testing.T) {
	needVM(t)
	needTool(t, "ibv_rc_pingpong", "ibverbs-utils")
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "1", "--calibrate", "0", "--vm-mem", "2048", "--vm-no-reference",
		"--timeout", "60s", "--results", root,
		"--server-cmd", "ibv_rc_pingpong -g 0 -p {port} -n 10", "--client-cmd", "ibv_rc_pingpong -g 0 -p {port} -n 10 {addr}")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	run := loadOnlyRun(t, root)
	p := run.Points[0]
	if !p.Passed || p.Connected != 1 || p.Error != "" || p.Target == nil || p.Target.Exit != "exit status 0" {
		for _, r := range p.Records {
			if r.Command != nil {
				t.Logf("client %s: %s", r.Outcome, r.Command.Tail)
			}
		}
		t.Fatalf("1 client: passed %v, %d connected, error %q, server %+v", p.Passed, p.Connected, p.Error, p.Target)
	}
	noChildren(t)
}

// rdmaprobe's own server and client as commands, in the guest, against
// the built-in path at the same counts: the same outcomes (the client
// over the cap refused) and the same kernel objects for the server.
//
// Guest, shared (and shared netdev for the commands): the kernel's object counts for both servers on rxe.
func TestVMTargetServeAgrees(t *testing.T) {
	needVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exe, err := verbsbin.Path(ctx)
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"ramp", "--backend", "vm", "--clients", "4", "--max-clients", "3", "--calibrate", "0", "--traffic", "0",
		"--rounds", "1", "--msg-size", "64", "--vm-mem", "2048", "--vm-no-reference"}
	builtinRoot, cmdRoot := t.TempDir(), t.TempDir()
	if _, errOut, code := run(t, append(common, "--results", builtinRoot)...); code != 0 {
		t.Fatalf("built-in: exit %d: %s", code, errOut)
	}
	server := exe + " serve --backend verbs --device {device} --listen 0.0.0.0:{port} --max-clients {max} --msg-size 64" +
		" --cert-out {dir}/server.pem --client-cert-out {dir}/client.pem --client-key-out {dir}/client.key"
	client := exe + " clients --backend verbs --device {device} --addr {addr}:{port} --n 1 --id-base {i} --rounds 1 --msg-size 64" +
		" --ca {dir}/server.pem --cert {dir}/client.pem --key {dir}/client.key --hold-stdin"
	if _, errOut, code := run(t, append(common, "--results", cmdRoot, "--server-cmd", server, "--client-cmd", client,
		"--client-ok", `^1/1 clients connected`)...); code != 0 {
		t.Fatalf("commands: exit %d: %s", code, errOut)
	}
	b, c := loadOnlyRun(t, builtinRoot).Points[0], loadOnlyRun(t, cmdRoot).Points[0]
	if b.Connected != 3 || b.Outcomes[result.OutcomeRefused] != 1 {
		t.Fatalf("built-in: outcomes %v", b.Outcomes)
	}
	if c.Connected != b.Connected || c.Outcomes[result.OutcomeExit] != 1 || c.Diagnosis == nil || c.Diagnosis.Limit != "max-clients" {
		t.Errorf("commands: %d connected, outcomes %v, diagnosis %+v; built-in %d, %v", c.Connected, c.Outcomes, c.Diagnosis, b.Connected, b.Outcomes)
	}
	bs, cs := b.Peak.ByRole["server"], c.Peak.ByRole["server"]
	for _, k := range []string{"qp", "cq", "mr"} {
		if bs[k] == 0 || bs[k] != cs[k] {
			t.Errorf("server's %s: built-in %d, as a command %d (by role: %v vs %v)", k, bs[k], cs[k], b.Peak.ByRole, c.Peak.ByRole)
		}
	}
	t.Logf("server objects: built-in %v, command %v; connect p50 %.1f vs %.1f ms", bs, cs, b.Connect.P50, c.Connect.P50)
	noChildren(t)
}

// The compiled-cap fixture, built per N on the host with MAX_CLIENTS={n}
// and run in the guest under a file limit planted on purpose (8 + 5
// descriptors): search between 5 and 6 finds exactly 5 (5 passes, 6
// fails) and names RLIMIT_NOFILE. The second trial of each N reuses its
// build.
//
// Guest, shared netdev: the fixture's verbs server on rxe under a planted file limit; its builds go in per count.
func TestVMTargetCompiledCap(t *testing.T) {
	needVM(t)
	needTool(t, "gcc", "gcc")
	needTool(t, "prlimit", "util-linux")
	src, err := filepath.Abs("../testdata/capserver")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	out, errOut, code := run(t, "search", "--backend", "vm", "--lo", "5", "--hi", "6", "--trials", "2", "--calibrate", "0",
		"--vm-mem", "2048", "--vm-no-reference", "--results", root, "--timeout", "60s",
		"--server-build", "make -s -C "+src+" OUT={build} MAX_CLIENTS={n}", "--server-build-cache", t.TempDir(),
		"--server-cmd", "prlimit --nofile=13:13 {build}/capserver -d {device} -p {port}",
		"--client-cmd", "{build}/capclient -a {addr} -p {port} -d {device}",
		"--client-stdin", `send Test\n`, "--client-ok", `^connected qpn`)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	run := loadOnlyRun(t, root)
	if s := run.Search; s == nil || s.Capacity != 5 || s.FirstFail != 6 {
		for _, p := range run.Points {
			for _, r := range p.Records {
				if r.Outcome != result.OutcomeOK {
					t.Logf("%d clients trial %d: client %d %s: %s", p.Clients, p.Trial, r.ID, r.Outcome, r.Error)
				}
			}
		}
		t.Fatalf("search %+v, want capacity 5 and first failure 6\n%s", run.Search, out)
	}
	if d := run.Diagnosis; d == nil || d.Limit != "rlimit-nofile" {
		t.Errorf("diagnosis %+v, want rlimit-nofile", run.Diagnosis)
	}
	for _, p := range run.Points {
		b := p.Target.Build
		if b == nil || b.Outputs["capserver"] == "" || b.Cached != (p.Trial == 2) {
			t.Errorf("%d clients trial %d: build %+v", p.Clients, p.Trial, b)
		}
		if p.Clients == 6 {
			if p.Connected != 5 || p.Outcomes[result.OutcomeExit] != 1 || p.Limits == nil || p.Limits.NoFile != 13 {
				t.Errorf("6 clients: %d connected, outcomes %v, limits %+v", p.Connected, p.Outcomes, p.Limits)
			}
		}
	}
	if !strings.Contains(out, "limiting factor") || !strings.Contains(out, "RLIMIT_NOFILE 13") {
		t.Errorf("output does not name the limit:\n%s", out)
	}
	noChildren(t)
}
