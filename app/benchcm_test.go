package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// bench rdmacm in the guest, small: one pass of cmtime's client and of
// rdmaprobe's generator in both modes against one cmtime server, each
// connecting all 50, with cmtime's step table read and rdmaprobe's
// steps timed; the file, its report and no process are left behind.
func TestVMBenchRDMACM(t *testing.T) {
	needVM(t)
	needTool(t, "cmtime", "rdmacm-utils")
	const n = 50
	root := t.TempDir()
	out, errOut, code := run(t, "bench", "rdmacm", "--backend", "vm", "--n", itoa(n), "--passes", "1",
		"--vm-mem", "2048", "--op-timeout", "60s", "--out", root)
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
		}
	}
	if len(cm.Ratios) != 2 || cm.Ratios[0].Median <= 0 || cm.Ratios[1].Median <= 0 {
		t.Errorf("ratios %+v", cm.Ratios)
	}
	if !strings.Contains(out, "median") || !strings.Contains(out, "What limits both") {
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
		{[]string{"--n", "0"}, "at least 1"},
	} {
		_, errOut, code := run(t, append([]string{"bench", "rdmacm", "--out", t.TempDir()}, c.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, errOut, ExitUsage, c.want)
		}
	}
}
