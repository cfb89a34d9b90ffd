package app

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
)

// A staircase against a planted QP cap finds the exact wall in one
// pass: its steps hold their clients, the step past the cap holds the
// wall's count with the cap named, and one fresh point at that count
// confirms it, which the verdict takes.
func TestStaircaseFindsSimulatedWall(t *testing.T) {
	root, profiles := t.TempDir(), t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "sim", "--staircase", "--clients", "100..400:100",
		"--sim-max-qp", "250", "--traffic", "300ms", "--calibrate", "0", "--timeout", "20s", "--results", root, "--profile", profiles)
	if code != ExitMeasured {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	climbProfiled(t, profiles, "250-1-server.pprof")
	r := loadOnlyRun(t, root)
	type got struct {
		clients, attempted, connected, held int
		cumulative, passed                  bool
	}
	var gots []got
	for _, p := range r.Points {
		gots = append(gots, got{p.Clients, p.Attempted, p.Connected, p.Held, p.Cumulative, p.Passed})
	}
	want := []got{
		{100, 100, 100, 0, true, true},
		{200, 200, 200, 100, true, true},
		{300, 300, 250, 200, true, false}, // the wall: 250 held at once
		{250, 250, 250, 0, false, true},   // the fresh point confirms it
	}
	if !reflect.DeepEqual(gots, want) {
		t.Fatalf("points (clients, attempted, connected, held, cumulative, passed):\n got %v\nwant %v", gots, want)
	}
	wall := r.Points[2]
	if len(wall.Records) != 100 || wall.Records[0].ID != 200 {
		t.Errorf("the step to 300 records %d clients from ID %d: want only the 100 it added, from 200", len(wall.Records), wall.Records[0].ID)
	}
	if d := wall.Diagnosis; d == nil || d.Limit != "device-cap:max_qp" {
		t.Errorf("the failing step's diagnosis %+v: want the device's max_qp named", d)
	}
	if tr := r.Points[1].Traffic; tr == nil || tr.Clients != 200 {
		t.Errorf("the step to 200's traffic phase %+v: want it over all 200 clients held", tr)
	}
	if v := r.Verdict; v == nil || len(v.Designs) != 1 || v.Designs[0].Capacity != 250 || v.Designs[0].FirstFail != 300 ||
		v.Designs[0].Limit != "device-cap:max_qp" {
		t.Errorf("verdict %+v: want capacity 250, first failure 300, max_qp named", v)
	}
	if !strings.Contains(out, "   300 clients (step, cumulative), 200 held before it: 250/300 connected") ||
		!strings.Contains(out, "confirm 250 with a fresh point") {
		t.Errorf("output does not show the steps and the confirmation:\n%s", out)
	}
}

// What a staircase cannot climb is refused in one line before anything
// starts.
func TestStaircaseRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--clients", "10,20", "--trials", "2"}, "--trials 2 with --staircase: a staircase is one pass"},
		{[]string{"--clients", "10,30,20"}, "--clients with --staircase: steps are the clients held after each, so they must increase: 20 after 30"},
		{[]string{"--clients", "10..30:7"}, `--clients: "10..30:7": HI - LO is not a multiple of STEP`},
	} {
		out, errOut, code := run(t, append([]string{"ramp", "--backend", "sim", "--staircase", "--results", t.TempDir()}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q: want one line with %q", tc.args, code, errOut, out, tc.want)
		}
	}
}

func TestParseCountsRanges(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{in: "20000..100000:20000", want: []int{20000, 40000, 60000, 80000, 100000}},
		{in: "5, 10..30:10, 50", want: []int{5, 10, 20, 30, 50}},
		{in: "1_000..1_000:1", want: []int{1000}},
		{in: "10..30", err: "no :STEP"},
		{in: "0..30:10", err: "LO must be at least 1"},
		{in: "30..10:10", err: "HI is below LO"},
		{in: "10..30:0", err: "STEP must be at least 1"},
		{in: "10..x:5", err: "whole numbers"},
		{in: "1..100000:1", err: "more than 10000 counts"},
	} {
		got, err := parseCounts(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseCounts(%q) = %v, %v: want an error saying %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("parseCounts(%q) = %v, %v: want %v", tc.in, got, err, tc.want)
		}
	}
}

// Ctrl-C mid-climb: the steps done are kept, the step cut short is the
// run's interrupted point (never a pass), and every process of the
// climb is reaped.
func TestStaircaseInterrupted(t *testing.T) {
	root := t.TempDir()
	cmd := runAsync(t, "ramp", "--backend", "sim", "--staircase", "--clients", "20,40,60",
		"--traffic", "1s", "--msg-size", "64", "--calibrate", "0", "--results", root)
	// Interrupt once the first step is on disk: the second is climbing,
	// its 1 s phase still to come.
	eventually.True(t, time.Minute, "the first step is saved", func() bool { return savedPoints(root) > 0 })
	cmd.interrupt()
	if r := <-cmd.done; r.code != ExitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", r.code, ExitInterrupted, r.errOut)
	}
	r := loadOnlyRun(t, root)
	if len(r.Points) != 1 || r.Points[0].Clients != 20 || !r.Points[0].Cumulative {
		t.Errorf("points %+v: want the first step alone", r.Points)
	}
	if p := r.Interrupted; p == nil || p.Clients != 40 || !p.Cumulative || p.Passed {
		t.Errorf("interrupted point %+v: want the step to 40, cut short, not passed", p)
	}
	if kids := children(t); len(kids) != 0 {
		t.Errorf("child processes left after the interrupt: %v", kids)
	}
}

// The server killed during a step, as the guest's OOM killer ends it at
// rxe's memory wall: that step is the wall, its failure recorded, and the
// climb still descends and confirms the count it held with a fresh
// point; the run is a measurement (exit 0) and every process is reaped.
func TestStaircaseServerKilled(t *testing.T) {
	root := t.TempDir()
	cmd := runAsync(t, "ramp", "--backend", "sim", "--staircase", "--clients", "20,200", "--connect-rate", "100",
		"--traffic", "0", "--msg-size", "64", "--calibrate", "0", "--timeout", "10s", "--results", root)
	eventually.True(t, time.Minute, "the first step is saved", func() bool { return savedPoints(root) > 0 })
	srv := childPID(t, "serve")
	serving(t, srv, 25) // the second step is under way
	if err := syscall.Kill(srv, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-cmd.done
	if r.code != ExitMeasured {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, ExitMeasured, r.out, r.errOut)
	}
	run := loadOnlyRun(t, root)
	if len(run.Points) != 3 {
		t.Fatalf("points %v: want two steps and the confirming point", clientsOf(run))
	}
	wall, fresh := run.Points[1], run.Points[2]
	if !wall.Cumulative || wall.Passed || !strings.Contains(wall.Error, "server died") || wall.Connected < 20 {
		t.Errorf("the step to 200: cumulative %v, passed %v, %d connected, error %q: want a failed step, the server's death named",
			wall.Cumulative, wall.Passed, wall.Connected, wall.Error)
	}
	if fresh.Cumulative || fresh.Clients != wall.Connected || !fresh.Passed {
		t.Errorf("confirming point: %d clients, cumulative %v, passed %v: want a fresh point of the %d held, passed",
			fresh.Clients, fresh.Cumulative, fresh.Passed, wall.Connected)
	}
	noChildren(t)
}

// climbProfiled checks that dir holds the CPU profiles (gzipped, as Go
// writes them) of a climb's server and first load generator, under the
// climb's names, beside the confirming point's server profile, named.
func climbProfiled(t *testing.T, dir, confirm string) {
	t.Helper()
	for _, name := range []string{"climb-server.pprof", "climb-clients-0.pprof", confirm} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			ents, _ := os.ReadDir(dir)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("profile %s: %d bytes, %v; the directory holds %v", name, len(b), err, names)
		}
	}
}
