package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/bench"
)

func TestBenchSim(t *testing.T) {
	checkBench(t, "sim", "--backend", "sim", "--passes", "2")
}

// checkBench runs a small bench and checks what it leaves behind: a
// loadable bench.json with every measurement complete, the ratios, and
// the report rendered from it.
func checkBench(t *testing.T, backend string, args ...string) {
	t.Helper()
	root := t.TempDir()
	out, errOut, code := run(t, append(append([]string{"bench"}, args...),
		// Every operation must succeed, so its deadline is generous: in CI
		// the guest is TCG on a loaded 2-core host, where one handshake
		// has been seen to take tens of seconds (0.1 connects/s at load
		// 30); the figures are not what this test checks.
		"--ops", "8", "--concurrency", "4", "--warmup", "1", "--op-timeout", "5m", "--results", root)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	paths, _ := filepath.Glob(filepath.Join(root, "*-bench-"+backend, bench.FileName))
	if len(paths) != 1 {
		t.Fatalf("bench files %v\n%s", paths, out)
	}
	r, err := bench.Load(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !r.Complete || len(r.Measurements) != 6 || len(r.Comparisons) != 2 {
		t.Fatalf("complete %v, %d measurements, %d comparisons (error %q)", r.Complete, len(r.Measurements), len(r.Comparisons), r.Error)
	}
	for _, m := range r.Measurements {
		if m.OK != 8*r.Config.Passes || m.Passes != r.Config.Passes || m.PerSec <= 0 {
			t.Errorf("%s at %d: %d/%d ok, %.1f/s (%s)", m.Name, m.Concurrency, m.OK, m.Attempted, m.PerSec, m.FirstError)
		}
	}
	if r.Backend.Simulated != (backend == "sim") || !strings.HasPrefix(r.Backend.Description, backend+":") {
		t.Errorf("backend %+v", r.Backend)
	}
	md, err := os.ReadFile(filepath.Join(filepath.Dir(paths[0]), "report.md"))
	if err != nil {
		t.Fatalf("no report beside the bench file: %v\n%s", err, out)
	}
	if !strings.Contains(string(md), "c/(a+b)") || !strings.Contains(out, "report: ") {
		t.Errorf("report lacks the ratio table, or was not announced:\n%s", out)
	}
}
