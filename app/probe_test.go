package app

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/result"
)

func loadOnlyRun(t *testing.T, root string) *result.Run {
	t.Helper()
	// A large run is saved compressed (result.GzipAbove).
	runs, _ := filepath.Glob(filepath.Join(root, "*", result.FileName+"*"))
	if len(runs) != 1 {
		t.Fatalf("want one run.json under %s, found %v", root, runs)
	}
	r, err := result.Load(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// savedPoints is how many points the one run under root holds on disk
// so far (0 before it is written); a run written mid-save does not load
// and counts 0 until the next look.
func savedPoints(root string) int {
	runs, _ := filepath.Glob(filepath.Join(root, "*", result.FileName+"*"))
	if len(runs) != 1 {
		return 0
	}
	r, err := result.Load(runs[0])
	if err != nil {
		return 0
	}
	return len(r.Points)
}

// A simulated device cap makes the true capacity a known number: with
// max_qp = 450 the server can hold 450 clients (one QP each), and search
// must report exactly that.
func TestSearchFindsSimulatedCap(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "search", "--backend", "sim", "--lo", "300", "--hi", "600",
		"--sim-max-qp", "450", "--rounds", "1", "--msg-size", "64", "--timeout", "20s", "--traffic", "0", "--calibrate", "0", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.HasPrefix(out, "backend: sim") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "simulated") {
		t.Errorf("first line must name the simulated backend: %q", strings.SplitN(out, "\n", 2)[0])
	}
	r := loadOnlyRun(t, root)
	if r.Search == nil || r.Search.Capacity != 450 {
		t.Fatalf("capacity %+v, want 450\n%s", r.Search, out)
	}
	if !r.Complete || !r.Backend.Simulated || r.Backend.Name != "sim" {
		t.Errorf("run: complete %v, backend %+v", r.Complete, r.Backend)
	}
	if !r.PSN.Unique || r.PSN.Connections == 0 {
		t.Errorf("PSN check: %+v", r.PSN)
	}
	// The first failing point's failures are the server's QP creation,
	// classified and carrying the errno.
	var failed *result.Point
	for i := range r.Points {
		if r.Points[i].Clients == 451 {
			failed = &r.Points[i]
		}
	}
	if failed == nil {
		t.Fatalf("451 clients not tested; points %v", clientsOf(r))
	}
	if failed.Outcomes[result.OutcomeQPCreate] == 0 {
		t.Errorf("451 clients: outcomes %v, want qp-create failures", failed.Outcomes)
	}
	if !regexp.MustCompile(`(?m)^\(simulated\) Verdict at the 100% threshold: capacity 450; first failure 451;`).MatchString(out) {
		t.Errorf("verdict line missing or not labelled simulated:\n%s", out)
	}
	if !strings.Contains(out, "Connect p50") {
		t.Errorf("no table in output:\n%s", out)
	}
}

// The done-when of the wall search, on a planted wall: searched from
// 100 with no --hi, the doubling fails first at 800 with the server's
// 450 QPs held; the search tests 450 and 451 and stops, exact, with the
// device cap named and every step's reason in the output and the report.
// No traffic phase: a rate that dips under load would add re-tests
// around a bend, which is not what this test is about.
func TestSearchFollowsSimulatedWall(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "search", "--backend", "sim", "--lo", "100",
		"--sim-max-qp", "450", "--traffic", "0", "--calibrate", "0", "--timeout", "20s", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if got, want := clientsOf(r), []int{100, 200, 400, 800, 450, 451}; !reflect.DeepEqual(got, want) {
		t.Errorf("measured %v, want %v", got, want)
	}
	if s := r.Search; s == nil || s.Capacity != 450 || s.FirstFail != 451 {
		t.Fatalf("search %+v, want capacity 450, first failure 451", r.Search)
	}
	if d := r.Diagnosis; d == nil || d.Limit != "device-cap:max_qp" {
		t.Errorf("diagnosis %+v, want the device's max_qp named", r.Diagnosis)
	}
	const why = "held 450 at once at 800 (350 qp-create EINVAL; device-cap:max_qp): test 450"
	if !strings.Contains(out, "next: 450 clients ("+why+")") {
		t.Errorf("output does not say why 450 was next:\n%s", out)
	}
	runs, _ := filepath.Glob(filepath.Join(root, "*", "report.md"))
	if len(runs) != 1 {
		t.Fatalf("report.md: %v", runs)
	}
	md, err := os.ReadFile(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), why) {
		t.Errorf("report.md does not give the step's reason %q", why)
	}
}

func clientsOf(r *result.Run) []int {
	var ns []int
	for _, p := range r.Points {
		ns = append(ns, p.Clients)
	}
	return ns
}

// With the server capped below the point, the extra clients are refused
// and classified as refused-at-capacity, not as errors.
func TestRampClassifiesRefusals(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "10,30", "--max-clients", "20",
		"--rounds", "2", "--msg-size", "64", "--timeout", "20s", "--traffic", "0", "--calibrate", "0", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if len(r.Points) != 2 {
		t.Fatalf("points %v", clientsOf(r))
	}
	p10, p30 := r.Points[0], r.Points[1]
	if p10.Connected != 10 || p10.SuccessRate != 1 {
		t.Errorf("10 clients: %d connected", p10.Connected)
	}
	if p30.Connected != 20 || p30.Outcomes[result.OutcomeRefused] != 10 {
		t.Errorf("30 clients: %d connected, outcomes %v; want 20 ok + 10 refused", p30.Connected, p30.Outcomes)
	}
	if p30.Server.Refused != 10 || p30.Server.PeakActive != 20 {
		t.Errorf("server view: %+v", p30.Server)
	}
	if r.Search.Capacity != 10 || r.Search.FirstFail != 30 {
		t.Errorf("search %+v", r.Search)
	}
	for _, rec := range p30.Records {
		if rec.Outcome != result.OutcomeOK {
			continue
		}
		if len(rec.RTTsUS) != 2 || rec.PhasesUS[result.PhaseTLS] <= 0 || rec.ConnectUS <= 0 {
			t.Errorf("ok record without RTTs or timings: %+v", rec)
		}
		for _, ph := range result.BuiltinPhases {
			if _, ok := rec.PhasesUS[ph]; !ok {
				t.Errorf("ok record lacks phase %s: %+v", ph, rec)
			}
		}
	}
	if !strings.Contains(out, "refused-at-capacity 10") {
		t.Errorf("refusals not shown:\n%s", out)
	}
}

// --tls-resume must really resume: each generator's first client
// connects alone, and every other one, launched together after it, finds
// its ticket (2 generators: 2 full handshakes of 12). Without it no
// handshake resumes (the server issues no tickets).
func TestTLSResumeResumes(t *testing.T) {
	for _, resume := range []bool{true, false} {
		root := t.TempDir()
		args := []string{"ramp", "--backend", "sim", "--clients", "12", "--procs", "2",
			"--rounds", "1", "--msg-size", "64", "--timeout", "20s", "--traffic", "0", "--calibrate", "0", "--results", root}
		if resume {
			args = append(args, "--tls-resume")
		}
		out, errOut, code := run(t, args...)
		if code != 0 {
			t.Fatalf("resume=%v: exit %d\n%s\n%s", resume, code, out, errOut)
		}
		r := loadOnlyRun(t, root)
		pt := r.Points[0]
		if pt.Connected != 12 {
			t.Fatalf("resume=%v: %d/12 connected", resume, pt.Connected)
		}
		if resume && pt.TLSResumed != 10 {
			t.Errorf("--tls-resume: %d of 12 handshakes resumed, want all but each generator's first", pt.TLSResumed)
		}
		if !resume && pt.TLSResumed != 0 {
			t.Errorf("without --tls-resume %d handshakes resumed", pt.TLSResumed)
		}
		if r.Config.GoMaxProcs != "split" {
			t.Errorf("config.gomaxprocs = %q, want the default split recorded", r.Config.GoMaxProcs)
		}
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"search", "--backend", "sim", "--lo", "0"}, "--lo must be at least 1"},
		{[]string{"search", "--backend", "sim", "--lo", "50", "--hi", "10"}, "--hi 10 is below --lo 50"},
		{[]string{"search", "--backend", "sim", "--threshold", "150"}, "--threshold"},
		{[]string{"search", "--backend", "sim", "--resolution", "0%"}, `--resolution "0%": want a percentage in (0, 100)`},
		{[]string{"ramp", "--backend", "sim", "--clients", "10,x"}, `"x" is not a positive client count`},
		{[]string{"ramp", "--backend", "nosuch"}, `unknown --backend "nosuch"`},
		{[]string{"ramp", "--backend", "sim", "--mode", "weird"}, `--mode: unknown resource mode "weird"`},
		{[]string{"search", "--lo", "abc"}, `--lo: "abc" is not a whole number`},
		{[]string{"ramp", "--backend", "sim", "--tls-kex", "rsa"}, `unknown TLS key exchange "rsa"`},
		{[]string{"bench", "--backend", "sim", "--tls-kex", "rsa"}, `unknown TLS key exchange "rsa"`},
		{[]string{"ramp", "--backend", "sim", "--gomaxprocs", "half"}, `--gomaxprocs "half": want split or all`},
		{[]string{"ramp", "--backend", "sim", "--msg-size", "8"}, "--msg-size 8 bytes: a message holds 12"},
		{[]string{"search", "--backend", "sim", "--msg-size", "0"}, "--msg-size 0 bytes: a message holds 12"},
		{[]string{"ramp", "--backend", "sim", "--msg-size", "2147483648"}, "--msg-size 2147483648 bytes"},
		{[]string{"bench", "--backend", "sim", "--msg-size", "-1"}, "--msg-size -1 bytes"},
		{[]string{"ramp", "--backend", "sim", "--rounds", "0"}, "--rounds 0: want 1 or more"},
		{[]string{"ramp", "--backend", "sim", "--timeout", "0s"}, "--timeout 0s: want more than 0"},
		{[]string{"search", "--backend", "sim", "--inflight", "-1"}, "--inflight -1: want 0 or more"},
		{[]string{"ramp", "--backend", "sim", "--max-clients", "-1"}, "--max-clients -1: want 0 or more"},
		{[]string{"ramp", "--backend", "sim", "--backlog", "-1"}, "--backlog -1: want 0 or more"},
		{[]string{"ramp", "--backend", "sim", "--connect-rate", "-1"}, "--connect-rate -1: want 0 (all at once) or more"},
		{[]string{"ramp", "--backend", "sim", "--connect-rate", "NaN"}, "--connect-rate NaN"},
		{[]string{"ramp", "--backend", "sim", "--calibrate", "-1s"}, "--calibrate -1s: want 0 (off) or more"},
		{[]string{"ramp", "--backend", "sim", "--sample-interval", "-1s"}, "--sample-interval -1s: want 0 (off) or more"},
		// A NaN would reach the saved JSON, which cannot hold it: the run
		// was lost at the end.
		{[]string{"ramp", "--backend", "sim", "--threshold", "NaN"}, "--threshold is a percentage in (0, 100], got NaN"},
		{[]string{"ramp", "--backend", "sim", "--msg-rate", "NaN"}, "--msg-rate NaN"},
	}
	// serve and clients have no --results.
	for _, args := range [][]string{{"serve", "--backend", "sim", "--max-clients", "1", "--msg-size", "4"},
		{"clients", "--backend", "sim", "--ca", "a", "--cert", "b", "--key", "c", "--msg-size", "4"}} {
		if _, errOut, code := run(t, args...); code != ExitUsage || !strings.Contains(errOut, "--msg-size 4 bytes: a message holds 12") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if _, errOut, code := run(t, "clients", "--backend", "sim", "--ca", "a", "--cert", "b", "--key", "c", "--rounds", "0"); code != ExitUsage || !strings.Contains(errOut, "--rounds 0: want 1 or more") {
		t.Errorf("clients --rounds 0: exit %d, stderr %q", code, errOut)
	}
	for _, tc := range []struct{ flag, value, want string }{
		{"--depth", "0", "--depth 0: want 1 to 1024"},
		{"--depth", "5000", "--depth 5000: want 1 to 1024"},
		{"--busy-poll", "-1ms", "--busy-poll -1ms: want 0 (off) to 1s"},
		{"--handshake-timeout", "0s", "--handshake-timeout 0s: want more than 0"},
		{"--exchange-timeout", "-1s", "--exchange-timeout -1s: want more than 0"},
	} {
		// --mode weird: should the check let the flag through, serve
		// fails on the mode at once instead of serving.
		args := []string{"serve", "--backend", "sim", "--max-clients", "1", "--mode", "weird", tc.flag, tc.value}
		if _, errOut, code := run(t, args...); code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	for _, tc := range tests {
		out, errOut, code := run(t, append(tc.args, "--results", t.TempDir())...)
		if code == 0 {
			t.Errorf("%v: exit 0", tc.args)
			continue
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: stderr %q does not say %q (stdout %q)", tc.args, errOut, tc.want, out)
		}
		if n := strings.Count(strings.TrimSpace(errOut), "\n"); n > 3 {
			t.Errorf("%v: %d lines of error output:\n%s", tc.args, n+1, errOut)
		}
	}
}

func TestMain_NoStrayProcesses(t *testing.T) {
	// After the probes above (and this short one), no child of this test
	// process is left.
	root := t.TempDir()
	if _, e, code := run(t, "ramp", "--backend", "sim", "--clients", "5", "--procs", "2", "--rounds", "1",
		"--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--results", root); code != 0 {
		t.Fatal(e)
	}
	if kids := children(t); len(kids) != 0 {
		t.Errorf("child processes left: %v", kids)
	}
}

// children lists the PIDs whose parent is this process.
func children(t *testing.T) []string {
	t.Helper()
	self := os.Getpid()
	// The shared guest's QEMU and the shared SSH hosts' script outlive
	// the runs; they are not left by one.
	shared := map[int]bool{sshHosts.PID(): true}
	for pid := range bootedGuests.PIDs() {
		shared[pid] = true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	var kids []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if pid, _ := strconv.Atoi(e.Name()); len(f) > 1 && f[1] == itoa(self) && !shared[pid] {
			kids = append(kids, e.Name()+" "+s[:i+1])
		}
	}
	return kids
}

// Ctrl-C mid-run leaves a valid run.json holding the points completed,
// marked incomplete, and a non-zero exit.
func TestInterruptSavesCompletedPoints(t *testing.T) {
	root := t.TempDir()
	cmd := runAsync(t, "ramp", "--backend", "sim", "--clients", "5,10,20,40,80,160,320,640,1280,2560,5120",
		"--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--results", root)
	// Interrupt as soon as the first point is on disk.
	eventually.True(t, 30*time.Second, "the first point is saved", func() bool { return savedPoints(root) > 0 })
	cmd.interrupt()
	if res := <-cmd.done; res.code != ExitInterrupted || !strings.Contains(res.errOut, "interrupted") {
		t.Errorf("exit %d, stderr %q; want %d saying interrupted", res.code, res.errOut, ExitInterrupted)
	}
	r := loadOnlyRun(t, root)
	if r.Complete || r.Error != "interrupted" || len(r.Points) == 0 || len(r.Points) == 11 {
		t.Errorf("run complete=%v error=%q points=%d", r.Complete, r.Error, len(r.Points))
	}
	if kids := children(t); len(kids) != 0 {
		t.Errorf("child processes left after interrupt: %v", kids)
	}
}

// Ctrl-C during a traffic phase, with every client of the point
// connected, cuts that point short like a cut connect phase: it is the
// run's interrupted point, saved apart, and run.json, the terminal and
// report.md count it nowhere (issue 49, case 1).
func TestInterruptInTrafficCountsNowhere(t *testing.T) {
	root := t.TempDir()
	metrics := freePort(t)
	cmd := runAsync(t, "ramp", "--backend", "sim", "--clients", "100,300",
		"--traffic", "1500ms", "--msg-size", "64", "--calibrate", "0", "--results", root, "--metrics-addr", metrics)
	// The 300 point's traffic window is open once a scrape shows its
	// message count, which the runner sets to 0 as the phase starts
	// (and, as the point ends, to its total): the 1.5 s phase leaves
	// the interrupt all but that.
	line := regexp.MustCompile(`(?m)^rdmaprobe_traffic_messages\{[^}]*point="300"[^}]*\} ([0-9.e+]+)$`)
	eventually.True(t, 3*time.Minute, "the 300 point's traffic phase runs", func() bool {
		r, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return line.Match(b)
	})
	cmd.interrupt()
	res := <-cmd.done
	if res.code != ExitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", res.code, ExitInterrupted, res.errOut)
	}
	r := loadOnlyRun(t, root)
	if p := r.Interrupted; p == nil || p.Clients != 300 || p.Passed {
		t.Fatalf("interrupted point %+v: want the 300 point, not passed", p)
	}
	if len(r.Points) != 1 || r.Points[0].Clients != 100 {
		t.Errorf("points %d: want the 100 point alone", len(r.Points))
	}
	if s := r.Search; s == nil || s.Capacity != 100 || s.FirstFail != 0 || len(s.Steps) != 1 {
		t.Errorf("search %+v: want capacity 100 from one step", s)
	}
	if v := r.Verdict; v == nil || v.Interrupted != 300 || v.Designs[0].Capacity != 100 || v.Designs[0].MaxConnected != 100 || v.Designs[0].Highest != 100 {
		t.Errorf("saved verdict %+v: want capacity and max connected 100, 300 interrupted", v)
	}
	term := res.out
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`│\s*300\s*│[^\n]*✅`),
		regexp.MustCompile(`Max connected: \**300`),
	} {
		if bad.MatchString(term) {
			t.Errorf("the terminal counts the point cut short (%s):\n%s", bad, term)
		}
	}
	if !regexp.MustCompile(`(?m)^\s*300\s[^\n]*interrupted`).MatchString(term) {
		t.Errorf("the terminal's table has no interrupted row for 300:\n%s", term)
	}
	md, err := os.ReadFile(filepath.Join(filepath.Dir(runFile(t, root)), "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"up to 300", "capacity > 300", "Max connected: **300**"} {
		if strings.Contains(string(md), bad) {
			t.Errorf("report.md counts the point cut short (%q):\n%s", bad, md)
		}
	}
	if !regexp.MustCompile(`\|\s*300\s*\|[^\n]*interrupted`).Match(md) {
		t.Errorf("report.md has no interrupted row for 300:\n%s", md)
	}
}

// runFile is the path of the one run under root.
func runFile(t *testing.T, root string) string {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(root, "*", result.FileName+"*"))
	if len(runs) != 1 {
		t.Fatalf("want one run.json under %s, found %v", root, runs)
	}
	return runs[0]
}

// Advice stops at the wall the run named, and one threshold speaks
// everywhere: with max_qp 200 the search fails 201 (200 of 201, 99.5%),
// and neither report.md nor the terminal recommends 201; the table's
// status and the Steps say "fail" of it in the same word, and the
// verdict calls it the first failure (issue 49, case 2).
func TestAdviceStopsAtTheWall(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "search", "--backend", "sim", "--lo", "50", "--hi", "300",
		"--sim-max-qp", "200", "--rounds", "1", "--msg-size", "64", "--timeout", "20s", "--traffic", "0", "--calibrate", "0", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if s := r.Search; s == nil || s.Capacity != 200 || s.FirstFail != 201 {
		t.Fatalf("search %+v, want capacity 200, first failure 201", r.Search)
	}
	if v := r.Verdict; v == nil || v.Designs[0].Wall != 201 || v.Designs[0].Practical != 200 || v.Designs[0].FirstFail != 201 {
		t.Errorf("saved verdict %+v: want the wall at 201, practical 200", v)
	}
	md, err := os.ReadFile(filepath.Join(filepath.Dir(runFile(t, root)), "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{out, string(md)} {
		if strings.Contains(text, "MAX_CLIENTS = 201") {
			t.Errorf("recommends 201, past the device's wall at 201:\n%s", text)
		}
	}
	if !strings.Contains(string(md), "Practical: MAX_CLIENTS = 200 (") {
		t.Errorf("report.md's practical advice is not 200:\n%s", md)
	}
	if !regexp.MustCompile(`(?m)^\s*201\s[^\n]*❌ fail`).MatchString(out) || !regexp.MustCompile(`(?m)^\s*\d+\.\s+201 fail `).MatchString(out) {
		t.Errorf("the table and the Steps do not both say fail of 201:\n%s", out)
	}
	if !regexp.MustCompile(`\|\s*201\s*\|[^\n]*❌ fail`).Match(md) || !strings.Contains(string(md), "first failure 201;") {
		t.Errorf("report.md does not fail 201 in its table and its verdict:\n%s", md)
	}
}
