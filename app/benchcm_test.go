package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/report"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// bench rdmacm in the guest, small: one pass of cmtime's client and of
// rdmaprobe's generator in both modes against one cmtime server, each
// connecting all 50, with cmtime's step table read and rdmaprobe's
// steps timed; the file, its report and no process are left behind.
//
// Guest, own boot: rdma_cm resolves only on rxe on the netdev; the agent runs rdmaprobe's side in-process, and its librdmacm keeps rxe1's context for the agent's life, so a shared guest would not come back clean.
func TestVMBenchRDMACM(t *testing.T) {
	needVM(t)
	needTool(t, "cmtime", "rdmacm-utils")
	const n = 50
	root := t.TempDir()
	out, errOut, code := run(t, "bench", "rdmacm", "--backend", "vm", "--connections", itoa(n), "--passes", "1",
		"--vm-mem", "2048", "--op-timeout", "60s", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	files, _ := filepath.Glob(filepath.Join(root, "*-bench-rdmacm-vm", bench.FileName))
	if len(files) != 1 {
		t.Fatalf("bench files %v", files)
	}
	run, err := bench.Load(files[0])
	if err != nil {
		t.Fatal(err)
	}
	cm := run.RDMACM
	if !run.Complete || cm == nil || len(cm.Measurements) != 3 {
		t.Fatalf("complete %v, error %q, comparison %+v", run.Complete, run.Error, cm)
	}
	for _, m := range cm.Measurements {
		if m.Connected != n || m.PerSec <= 0 || m.Sec <= 0 || m.Error != "" {
			t.Errorf("%s %s: %d/%d connected, %.1f/s over %.3f s, error %q", m.Client, m.Mode, m.Connected, m.Attempted, m.PerSec, m.Sec, m.Error)
		}
		if m.Client == bench.CMTimeClient {
			if len(m.CMTimeSteps) < len(bench.CMTimeConnectSteps) || m.StepsMS["connect"] <= 0 {
				t.Errorf("cmtime's steps not read: %+v", m.CMTimeSteps)
			}
		} else if m.StepsMS[result.PhaseResolveRoute] <= 0 || m.StepsMS[result.PhaseEstablish] <= 0 || m.Outcomes[result.OutcomeOK] != n {
			t.Errorf("rdmaprobe (%s): steps %v, outcomes %v", m.Mode, m.StepsMS, m.Outcomes)
		} else if e := m.PerConnMS[result.PhaseEstablish]; e.Min <= 0 || e.Min > e.P50 || e.P50 > e.Max {
			t.Errorf("rdmaprobe (%s): establish per connection %+v, want 0 < min <= p50 <= max", m.Mode, e)
		}
	}
	if len(cm.Ratios) != 2 || cm.Ratios[0].Median <= 0 || cm.Ratios[1].Median <= 0 {
		t.Errorf("ratios %+v", cm.Ratios)
	}
	if !strings.Contains(out, "median") || !strings.Contains(out, "What limits both") || !strings.Contains(out, "max ms/conn") {
		t.Errorf("output lacks the ratio or the limits:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(files[0]), "report.md")); err != nil {
		t.Error(err)
	}
	t.Logf("\n%s", out)
	noChildren(t)
}

// Refusals, before any guest boots: another backend, a mode that is not
// one, and no cmtime.
func TestBenchRDMACMRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "sim"}, "only vm"},
		{[]string{"--cm-modes", "interleaved,fast"}, `--cm-modes "fast"`},
		{[]string{"--cmtime", "/nonexistent/cmtime"}, "--cmtime"},
		{[]string{"--connections", "0"}, "at least 1"},
	} {
		_, errOut, code := run(t, append([]string{"bench", "rdmacm", "--results", t.TempDir()}, c.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, errOut, ExitUsage, c.want)
		}
	}
}

// The step table sets like beside like: cmtime's min and max per
// connection beside rdmaprobe's, cmtime's total over all N in a column
// of its own, and a dash where a client does not measure a figure
// (cmtime prints no median, rdmaprobe no step over all N).
func TestPrintCMBenchSteps(t *testing.T) {
	run := &bench.Run{RDMACM: &bench.CMRun{N: 1000, Passes: 1, Modes: []string{bench.CMLockstep},
		Measurements: []bench.CMMeasurement{
			{Pass: 1, Client: bench.CMTimeClient, Attempted: 1000, Connected: 1000, Sec: 1.6, PerSec: 625,
				CMTimeSteps: []bench.CMTimeStep{
					{Name: "create id", TotalMS: 3.1, MaxMS: 0.02, MinUS: 1, PerConnUS: 3.1},
					{Name: "resolve addr", TotalMS: 120.5, MaxMS: 110.25, MinUS: 40, PerConnUS: 120.5},
					{Name: "resolve route", TotalMS: 90, MaxMS: 80, MinUS: 30, PerConnUS: 90},
					{Name: "create qp", TotalMS: 400, MaxMS: 1.5, MinUS: 250, PerConnUS: 400},
					{Name: "connect", TotalMS: 986.4, MaxMS: 900, MinUS: 2500, PerConnUS: 986.4}}},
			{Pass: 1, Client: bench.RDMAProbeClient, Mode: bench.CMLockstep, Attempted: 1000, Connected: 1000, Sec: 1.5, PerSec: 666.7,
				PerConnMS: map[string]bench.CMSpread{
					result.PhaseResolveAddr:  {Min: 0.05, P50: 60, Max: 115},
					result.PhaseResolveRoute: {Min: 0.04, P50: 40, Max: 85},
					result.PhaseQPCreate:     {Min: 0.2, P50: 0.3, Max: 1.2},
					result.PhaseEstablish:    {Min: 3, P50: 450, Max: 880}}},
		}}}
	run.RDMACM.Summarise()
	var b strings.Builder
	if err := report.PrintCMBench(&b, run, 1000); err != nil {
		t.Fatal(err)
	}
	want := `
┌──────────────────────┬───────────┬──────┬────────────┬──────────┐
│        Pass 1        │ Connected │  s   │ connects/s │ × cmtime │
├──────────────────────┼───────────┼──────┼────────────┼──────────┤
│               cmtime │ 1000/1000 │ 1.60 │      625.0 │          │
│ rdmaprobe (lockstep) │ 1000/1000 │ 1.50 │      666.7 │     1.07 │
└──────────────────────┴───────────┴──────┴────────────┴──────────┘
┌───────────────┬──────────────────────┬─────────────┬─────────────┬─────────────┬──────────┐
│  Pass 1 step  │        Client        │ min ms/conn │ p50 ms/conn │ max ms/conn │ all N ms │
├───────────────┼──────────────────────┼─────────────┼─────────────┼─────────────┼──────────┤
│  resolve addr │               cmtime │        0.04 │           — │      110.25 │   120.50 │
│  resolve addr │ rdmaprobe (lockstep) │        0.05 │       60.00 │      115.00 │        — │
│ resolve route │               cmtime │        0.03 │           — │       80.00 │    90.00 │
│ resolve route │ rdmaprobe (lockstep) │        0.04 │       40.00 │       85.00 │        — │
│     create qp │               cmtime │        0.25 │           — │        1.50 │   400.00 │
│     create qp │ rdmaprobe (lockstep) │        0.20 │        0.30 │        1.20 │        — │
│       connect │               cmtime │        2.50 │           — │      900.00 │   986.40 │
│       connect │ rdmaprobe (lockstep) │        3.00 │      450.00 │      880.00 │        — │
└───────────────┴──────────────────────┴─────────────┴─────────────┴─────────────┴──────────┘
(ms/conn: one connection's step, from its call to its completion; all N ms: from the step's first call to its last completion over all N, cmtime's total; — where the client does not measure it)
rdmaprobe (lockstep) / cmtime connects/s: median 1.07× over 1 passes (1.07) — target ≥ 1.0: yes
`
	if got := b.String(); got != want[1:] {
		t.Errorf("printed:\n%s\nwant:\n%s", got, want[1:])
	}
}
