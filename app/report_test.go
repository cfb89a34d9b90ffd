package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
)

// `rdmaprobe report` on a run saved by search reproduces, byte for byte,
// the files search wrote at its end.
func TestReportRegeneratesSearchOutput(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "search", "--backend", "sim", "--lo", "10", "--hi", "30", "--sim-max-qp", "20",
		"--rounds", "1", "--msg-size", "64", "--traffic", "300ms", "--calibrate", "0", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	runs, _ := filepath.Glob(filepath.Join(root, "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("runs %v", runs)
	}
	dir := filepath.Dir(runs[0])
	if !strings.Contains(out, "report: "+filepath.Join(dir, "report.html")) {
		t.Errorf("search did not say where the report is:\n%s", out)
	}
	again := t.TempDir()
	if o, e, code := run(t, "report", "--report-dir", again, runs[0]); code != 0 {
		t.Fatalf("report: exit %d\n%s\n%s", code, o, e)
	}
	written, _ := filepath.Glob(filepath.Join(dir, "*"))
	n := 0
	for _, f := range written {
		if filepath.Base(f) == "run.json" {
			continue
		}
		n++
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(again, filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: regenerated file differs (%v)", filepath.Base(f), err)
		}
	}
	// The traffic phase is on by default: its three plots join the five.
	if n != 10 {
		t.Errorf("search wrote %d report files, want 10 (md, html, 8 plots)", n)
	}
}

// Bad input to report and compare: one line naming the file and the
// problem, a non-zero exit, nothing written.
func TestReportBadInput(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("../report/testdata/published.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"truncated.json": {good[:len(good)/2], "truncated JSON"},
		"corrupt.json":   {[]byte(`{"schema_version": 1, "tool": "rdmaprobe", "points": [}`), "corrupt JSON"},
		"foreign.json":   {[]byte(`{"name": "something else", "version": 3}`), "not an rdmaprobe run"},
		"newer.json":     {bytes.Replace(good, []byte(`"schema_version": 1`), []byte(`"schema_version": 99`), 1), "newer than this build reads"},
		"empty.json":     {nil, "empty file"},
	}
	for name, c := range cases {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		_, errOut, code := run(t, "report", "--report-dir", out, p)
		if code == 0 || !strings.Contains(errOut, p) || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q; want one line naming the file and %q", name, code, errOut, c.want)
		}
		if files, _ := os.ReadDir(out); len(files) != 0 {
			t.Errorf("%s: wrote %d files", name, len(files))
		}
		_, errOut, code = run(t, "compare", "--report-dir", out, "../report/testdata/published.json", p)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("compare with %s: exit %d, stderr %q", name, code, errOut)
		}
	}
	for _, args := range [][]string{{"report"}, {"report", "a.json", "b.json"}, {"report", "--format", "pdf", "x.json"}, {"compare", "a.json"}} {
		if _, errOut, code := run(t, args...); code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if _, _, code := run(t, "report", "--report-dir", t.TempDir(), "/nonexistent/run.json"); code != 1 {
		t.Errorf("missing file: exit %d", code)
	}
}

// A saved bench.json renders as a bench report, not as an empty capacity
// run; bench files compare with bench files, and a mix is refused.
func TestReportBench(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../report/testdata/bench-sim.json")
	if err != nil {
		t.Fatal(err)
	}
	benchPath := filepath.Join(dir, "bench.json")
	if err := os.WriteFile(benchPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "report", benchPath)
	if code != 0 || !strings.Contains(out, "report: "+filepath.Join(dir, "report.md")) {
		t.Fatalf("report: exit %d\n%s\n%s", code, out, errOut)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"# rdmaprobe bench on sim", "(c) full connect", "c/(a+b)", "target ≤ 1.5: **met**", "The fabric is simulated"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "completed point") {
		t.Errorf("bench file rendered as a capacity run:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(dir, "bench-cost.png")); err != nil {
		t.Error(err)
	}

	runPath := "../report/testdata/published.json"
	_, errOut, code = run(t, "compare", "--report-dir", t.TempDir(), runPath, benchPath)
	if code != 2 || !strings.Contains(errOut, benchPath+" is a bench file") || !strings.Contains(errOut, "is a capacity run") ||
		strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("compare run with bench: exit %d, stderr %q; want 2 and one line saying which is which", code, errOut)
	}

	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, data, 0o644)
	cmpDir := t.TempDir()
	out, errOut, code = run(t, "compare", "--report-dir", cmpDir, benchPath, other)
	if code != 0 || !strings.Contains(out, "comparison: "+filepath.Join(cmpDir, "compare.md")) {
		t.Fatalf("compare bench files: exit %d\n%s\n%s", code, out, errOut)
	}
	cmp, _ := os.ReadFile(filepath.Join(cmpDir, "compare.md"))
	if !strings.Contains(string(cmp), "comparison of 2 bench runs") || !strings.Contains(string(cmp), "sim (simulated) 2026-11-23 13:32 #2") {
		t.Errorf("compare.md:\n%s", cmp)
	}
}

// A run with no point to report says why in one line, whether it never
// started, stopped before its first point or is still running; compare
// refuses it the same way.
func TestReportRunWithoutPoints(t *testing.T) {
	for _, tc := range []struct {
		err, want string
	}{
		{result.NotStarted + "guest not ready after 1m0s", "the run never started: guest not ready after 1m0s"},
		{"measure 10 clients (trial 1): server not ready", "no point was measured: the run stopped (measure 10 clients"},
		{"", "no point was measured yet"},
	} {
		dir := t.TempDir()
		path, err := result.SaveRun(dir, &result.Run{SchemaVersion: result.SchemaVersion, Tool: "rdmaprobe",
			Mode: "ramp", Backend: result.Backend{Name: "vm"}, Points: []result.Point{}, Error: tc.err})
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		_, errOut, code := run(t, "report", path, "--report-dir", out)
		if code != ExitRunError || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, path+": "+tc.want) {
			t.Errorf("report of a run with error %q: exit %d, stderr %q; want one line with %q", tc.err, code, errOut, tc.want)
		}
		if files, _ := os.ReadDir(out); len(files) != 0 {
			t.Errorf("report wrote %d files for a run without points", len(files))
		}
		_, errOut, code = run(t, "compare", "../report/testdata/published.json", path, "--report-dir", out)
		if code != ExitRunError || !strings.Contains(errOut, tc.want) {
			t.Errorf("compare with it: exit %d, stderr %q", code, errOut)
		}
	}
}

// A binary without the verbs fabric, outside a source tree to build one
// from, asked for --backend vm: one line, exit 1, and no run directory
// (it used to leave run.json with "points": null).
func TestRunThatCannotStartLeavesNothing(t *testing.T) {
	if protocol.HasVerbs() {
		t.Skip("this test binary has the verbs fabric (built with -tags verbs): the run would start")
	}
	root := t.TempDir()
	t.Chdir(t.TempDir()) // no go.mod above: nothing to build a verbs binary from
	_, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "5", "--results", root)
	if code != ExitRunError || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want %d and one line", code, errOut, ExitRunError)
	}
	if ok, _ := vm.GuestAvailable(); ok && !strings.Contains(errOut, "no verbs fabric") {
		t.Errorf("stderr %q does not say the binary has no verbs fabric", errOut)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("a run that never started left %v in the results directory", ents)
	}
}

// report takes a run's directory, and compare names each run by its
// directory and the command that made it.
func TestReportDirAndCompareNames(t *testing.T) {
	b, err := os.ReadFile("../report/testdata/published.json")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var dirs []string
	for _, name := range []string{"20260101T000000Z-vm", "20260102T000000Z-vm"} {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "run.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	out, errOut, code := run(t, "report", "--format", "md", dirs[0])
	if code != 0 || !strings.Contains(out, filepath.Join(dirs[0], "report.md")) {
		t.Fatalf("report DIR: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := run(t, "report", root); code == 0 || !strings.Contains(errOut, "without run.json") {
		t.Errorf("report of a directory without a run: exit %d, stderr %q", code, errOut)
	}
	cmp := t.TempDir()
	if _, errOut, code := run(t, "compare", "--format", "md", "--report-dir", cmp, dirs[0], filepath.Join(dirs[1], "run.json")); code != 0 {
		t.Fatalf("compare: exit %d: %s", code, errOut)
	}
	md, err := os.ReadFile(filepath.Join(cmp, "compare.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !strings.Contains(string(md), filepath.Base(d)+": ") {
			t.Errorf("compare.md does not name %s by its directory and command", filepath.Base(d))
		}
	}
}
