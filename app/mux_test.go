package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Mux mode on the simulated fabric: 300 logical clients, 10 to a QP, over
// 2 load generators: each generator's 150 ride ⌈150/10⌉ = 15 QPs, every
// logical client is admitted, connected and echoed on its own, and the
// run counts both.
func TestMuxRamp(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "sim", "--rounds", "1", "--msg-size", "64", "--results", root,
		"--clients", "300", "--procs", "2", "--mode", "mux", "--mux", "10", "--sample-interval", "0", "--calibrate", "0", "--traffic", "0")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	p := r.Points[0]
	if p.Connected != 300 || p.QPs != 30 || r.Config.Mux != 10 {
		t.Fatalf("%d connected on %d QPs (mux %d), want 300 on 30; outcomes %v", p.Connected, p.QPs, r.Config.Mux, p.Outcomes)
	}
	if p.Server.PeakActive != 300 || p.Server.PeakQPs != 30 || len(p.Server.Failures) != 0 {
		t.Errorf("server %+v: want 300 logical clients on 30 QPs at once, no failure", p.Server)
	}
	if !strings.Contains(out, "30 QPs") {
		t.Errorf("terminal does not count the QPs:\n%s", out)
	}
	// The report says what its clients are, and that they share their
	// QP's fate.
	runs, _ := filepath.Glob(filepath.Join(root, "*", "report.md"))
	if len(runs) != 1 {
		t.Fatalf("reports %v", runs)
	}
	md, _ := os.ReadFile(runs[0])
	for _, want := range []string{"10 logical clients per QP", "share its fate", "at most 300 logical clients connected, on 30 QPs"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}

	// What logical clients cannot do is refused before anything starts.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mux", "4"}, "--mux 4: logical clients share QPs only with --mode mux"},
		{[]string{"--mode", "mux", "--op", "write"}, "--op write with --mode mux: logical clients sharing a QP exchange messages only"},
	} {
		_, errOut, code := run(t, append([]string{"ramp", "--backend", "sim", "--clients", "2", "--results", t.TempDir()}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want one line saying %q", c.args, code, errOut, c.want)
		}
	}
}

// A ramp over per-client and mux designs with the default traffic
// phase, 0.5 s long: both designs' 20 clients (mux's logical clients, 10 to a QP)
// exchange messages, every one measured, and the capacity-by-design
// table gives each design its message rate.
func TestMuxRampTraffic(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "sim", "--rounds", "1", "--msg-size", "64", "--results", root,
		"--clients", "20", "--mode", "per-client,mux", "--mux", "10", "--traffic", "500ms", "--sample-interval", "0", "--calibrate", "0")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if len(r.Points) != 2 || r.Config.Traffic == nil {
		t.Fatalf("%d points, traffic %+v: want one per design, with the traffic phase", len(r.Points), r.Config.Traffic)
	}
	for _, p := range r.Points {
		tr := p.Traffic
		if p.Connected != 20 || tr == nil || tr.Clients != 20 || tr.Messages < 20 || tr.ErrorCount() != 0 || tr.ClientsFailed != 0 ||
			tr.Unmeasured != 0 || tr.MsgRate <= 0 {
			t.Errorf("%s: %d connected, traffic %+v", p.Design, p.Connected, tr)
		}
		if p.Design == "mux" && p.QPs != 2 {
			t.Errorf("mux: %d QPs, want 2", p.QPs)
		}
	}
	// Off a terminal the table is plain columns: a design's row starts
	// with its name.
	_, table, _ := strings.Cut(out, "Capacity by server design:")
	for _, design := range []string{"per-client", "mux"} {
		rated := false
		for _, line := range strings.Split(table, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == design && strings.Contains(line, " msg/s (at 20)") {
				rated = true
			}
		}
		if !rated {
			t.Errorf("the design table gives %s no message rate:\n%s", design, out)
		}
	}
}
