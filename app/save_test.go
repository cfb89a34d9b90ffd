package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// A run larger than result.GzipAbove is saved as run.json.gz: the line
// that says where the run went names that file, no plain run.json is
// left beside it, and report and compare read it as they read a plain
// run.
func TestLargeRunSavedGzipped(t *testing.T) {
	root := t.TempDir()
	// 50 round trips a client make 2,500 clients' records larger than
	// GzipAbove at a fraction of the time more clients take.
	out, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "2500", "--procs", "2", "--mode", "srq",
		"--detach", "--rounds", "50", "--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	runs, _ := filepath.Glob(filepath.Join(root, "*", result.FileName+"*"))
	if len(runs) != 1 || filepath.Base(runs[0]) != result.FileName+".gz" {
		t.Fatalf("saved %v, want one %s.gz", runs, result.FileName)
	}
	gz := runs[0]
	if !strings.Contains(out, "saved "+gz+"\n") {
		t.Errorf("output does not name the saved file %s:\n%s", gz, out)
	}
	r, err := result.Load(gz)
	if err != nil || len(r.Points) != 1 || r.Points[0].Connected != 2500 {
		t.Fatalf("load %s: %v", gz, err)
	}

	small := t.TempDir()
	if o, e, code := run(t, "ramp", "--backend", "sim", "--clients", "20", "--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--results", small); code != 0 {
		t.Fatalf("small ramp: exit %d\n%s\n%s", code, o, e)
	}
	plain, _ := filepath.Glob(filepath.Join(small, "*", result.FileName))
	if len(plain) != 1 {
		t.Fatalf("small run saved as %v, want one plain %s", plain, result.FileName)
	}
	rep := t.TempDir()
	if o, e, code := run(t, "report", "--report-dir", rep, gz); code != 0 {
		t.Fatalf("report %s: exit %d\n%s\n%s", gz, code, o, e)
	}
	if b, err := os.ReadFile(filepath.Join(rep, "report.md")); err != nil || !strings.Contains(string(b), "2500") {
		t.Errorf("report of the gzipped run: %v\n%s", err, b)
	}
	cmp := t.TempDir()
	if o, e, code := run(t, "compare", "--report-dir", cmp, plain[0], gz); code != 0 {
		t.Fatalf("compare plain with gzipped: exit %d\n%s\n%s", code, o, e)
	}
}
