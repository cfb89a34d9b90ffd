package app

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// One search over two server designs with different walls: on a sim
// device with 12 CQs and 10 QPs, per-client (2 CQs a client) holds 6
// clients and srq (shared CQs, 1 QP a client) 10. Each design's search
// finds its own, --require 10 fails for per-client alone (exit 3), the
// capacity-by-design table is printed and rendered, each design gets its
// report, and compare sets the designs side by side.
func TestSearchOverTwoDesigns(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "search", "--backend", "sim", "--mode", "per-client,srq", "--lo", "2", "--hi", "16",
		"--sim-max-cq", "12", "--sim-max-qp", "10", "--traffic", "0", "--rounds", "1", "--msg-size", "64", "--calibrate", "0",
		"--results", root, "--require", "10")
	if code != ExitRequirement {
		t.Fatalf("exit %d, want %d (requirement not met by per-client)\nstdout:\n%s\nstderr:\n%s", code, ExitRequirement, out, errOut)
	}
	if !strings.Contains(errOut, "requirement not met: 10 clients by connect in every design; max connected among the counts tested: per-client 6\n") {
		t.Errorf("stderr %q: want per-client's 6 named, and srq not", errOut)
	}
	r := loadOnlyRun(t, root)
	if r.Search != nil || len(r.Designs) != 2 || r.Config.ResourceMode != "per-client,srq" {
		t.Fatalf("search %+v, designs %+v, mode %q", r.Search, r.Designs, r.Config.ResourceMode)
	}
	pc, srq := r.Designs[0], r.Designs[1]
	if pc.Mode != "per-client" || pc.MaxConnected != 6 || pc.Search == nil || pc.Search.FirstFail != 7 ||
		pc.Diagnosis == nil || pc.Diagnosis.Limit != "device-cap:max_cq" || pc.LimitAt != 7 {
		t.Errorf("per-client: %+v (search %+v, diagnosis %+v)", pc, pc.Search, pc.Diagnosis)
	}
	if srq.Mode != "srq" || srq.MaxConnected != 10 || srq.Search == nil || srq.Search.FirstFail != 11 ||
		srq.Diagnosis == nil || srq.Diagnosis.Limit != "device-cap:max_qp" || srq.LimitAt != 11 {
		t.Errorf("srq: %+v (search %+v, diagnosis %+v)", srq, srq.Search, srq.Diagnosis)
	}
	var order []string
	for _, p := range r.Points {
		if p.Design == "" {
			t.Errorf("%d clients: no design recorded", p.Clients)
		}
		order = append(order, p.Design+" "+itoa(p.Clients))
	}
	if len(order) < 4 || strings.Join(order[:4], ", ") != "per-client 2, srq 2, per-client 16, srq 16" {
		t.Errorf("points in the order %v, want the designs in turns", order)
	}
	if !strings.Contains(out, "Capacity by server design:") || !regexp.MustCompile(`(?m)^\s*per-client\s+6\s`).MatchString(out) || !regexp.MustCompile(`(?m)^\s*srq\s+10\s`).MatchString(out) {
		t.Errorf("stdout lacks the design table:\n%s", out)
	}
	dir := filepath.Dir(loadPath(t, root))
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Capacity by server design") || !strings.Contains(string(md), "| per-client | 6 ") ||
		!strings.Contains(string(md), "device-cap:max_cq at 7") || !strings.Contains(string(md), "(report-srq.md)") {
		t.Errorf("report.md:\n%s", md)
	}
	for _, f := range []string{"report-per-client.md", "report-srq.html", "design-success.png", "srq-success.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("no %s beside the run: %v", f, err)
		}
	}
	cmp := t.TempDir()
	if _, errOut, code := run(t, "compare", "--report-dir", cmp, "--format", "md", loadPath(t, root), "../report/testdata/published.json"); code != 0 {
		t.Fatalf("compare: exit %d: %s", code, errOut)
	}
	c, err := os.ReadFile(filepath.Join(cmp, "compare.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c), "sim (simulated) per-client") || !strings.Contains(string(c), "sim (simulated) srq") {
		t.Errorf("compare.md does not set the designs side by side:\n%s", c)
	}
}

func loadPath(t *testing.T, root string) string {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(root, "*", result.FileName+"*"))
	if len(runs) != 1 {
		t.Fatalf("want one run under %s, found %v", root, runs)
	}
	return runs[0]
}

// A list of designs no run could measure is refused in one line, before
// anything starts.
func TestDesignListErrors(t *testing.T) {
	for _, tc := range []struct {
		mode, extra, want string
	}{
		{"per-client,per-client", "", "rdmaprobe: --mode names per-client twice"},
		{"per-client,bogus", "", `rdmaprobe: --mode: unknown resource mode "bogus"`},
		{"per-client,srq", "--server-cmd=/bin/true {port}", "rdmaprobe: --mode with several designs needs rdmaprobe's own server"},
	} {
		root := t.TempDir()
		args := []string{"ramp", "--backend", "sim", "--mode", tc.mode, "--clients", "2", "--results", root}
		if tc.extra != "" {
			args = append(args, tc.extra)
		}
		out, errOut, code := run(t, args...)
		if code != ExitUsage || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, tc.want) {
			t.Errorf("--mode %s %s: exit %d, stderr %q; want exit 2, one line starting %q", tc.mode, tc.extra, code, errOut, tc.want)
		}
		if left, _ := os.ReadDir(root); len(left) != 0 {
			t.Errorf("--mode %s: left %v behind\n%s", tc.mode, left, out)
		}
	}
}
