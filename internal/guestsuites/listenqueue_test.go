package guestsuites

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// The seed project's case, planted: a server with a listen queue of 1
// that pauses after each accept (testdata/capserver, BACKLOG=1,
// HANDSHAKE_MS=300) and its own client, which gives up on a wait after
// 2 s and exits 7, well inside --timeout. The clients the full queue
// turned away fail as exit, opaque to the harness, and the diagnosis
// made in the guest still names the listen queue from the overflow
// counter that rose during the point.
func TestGuestListenQueueBehindExit(t *testing.T) {
	if ok, why := softroce.Available(); !ok {
		parts.Missing(t, "no Soft-RoCE guest: %s", why)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		parts.Missing(t, "gcc not installed (scripts/setup.sh installs it)")
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		parts.Missing(t, "libibverbs-dev missing (make setup installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exe, err := verbsbin.Path(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src, err := filepath.Abs("../../testdata/capserver")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cmd := exec.CommandContext(ctx, exe, "ramp", "--backend", "vm", "--clients", "16", "--calibrate", "0", "--traffic", "0",
		"--vm-mem", "2048", "--results", root, "--timeout", "60s",
		"--server-build", "make -s -C "+src+" OUT={build} MAX_CLIENTS={n} BACKLOG=1 HANDSHAKE_MS=300", "--server-build-cache", t.TempDir(),
		"--server-cmd", "{build}/capserver -d {device} -p {port}",
		"--client-cmd", "{build}/capclient -a {addr} -p {port} -d {device} -t 2",
		"--client-stdin", `send Test\n`, "--client-ok", `^connected qpn`)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(root, "*", "run.json*"))
	if len(files) != 1 {
		t.Fatalf("run files %v:\n%s", files, out)
	}
	run, err := result.Load(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Points) != 1 {
		t.Fatalf("%d points:\n%s", len(run.Points), out)
	}
	p := run.Points[0]
	exits := p.Outcomes[result.OutcomeExit]
	for k, n := range p.Outcomes {
		if k != result.OutcomeOK && k != result.OutcomeExit && n > exits {
			t.Fatalf("outcomes %v: most failed as %s, not as exit (the case this test is for)\n%s", p.Outcomes, k, out)
		}
	}
	if exits == 0 || p.Limits == nil || p.LimitsAfter == nil || p.LimitsAfter.ListenOverflows <= p.Limits.ListenOverflows {
		t.Fatalf("outcomes %v, limits %+v → %+v: want clients exiting while the listen queue overflowed\n%s", p.Outcomes, p.Limits, p.LimitsAfter, out)
	}
	d := p.Diagnosis
	if d == nil || d.Limit != "listen-backlog" || !strings.Contains(d.Summary, "failed (exit") {
		t.Fatalf("diagnosis %+v, want listen-backlog behind exits\n%s", d, out)
	}
	if ev := strings.Join(d.Evidence, "\n"); !strings.Contains(ev, "tcp_listen_overflows rose") {
		t.Errorf("evidence lacks the counter's rise:\n%s", ev)
	}
	if !strings.Contains(string(out), "limiting factor: "+d.Summary) {
		t.Errorf("terminal lacks the diagnosis:\n%s", out)
	}
	t.Logf("%d/%d connected, outcomes %v: %s (the run took %.1f s, its point %.1f s)",
		p.Connected, p.Clients, p.Outcomes, d.Summary, took.Seconds(), p.DurationSec)
}
