package collectors

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/result"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Fixtures from `rdma -j resource show [qp|mr]` in the Soft-RoCE guest
// while fabric/verbs' TestResourceCountsMatchRdmaTool held a PD and 3
// clients' worth of objects (2 CQ + 2 MR + 1 QP each).
func TestParseSummary(t *testing.T) {
	got, err := ParseSummary(fixture(t, "rdma_resource_show.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"pd": 2, "cq": 7, "qp": 4, "cm_id": 0, "mr": 6, "ctx": 1, "srq": 0}
	for k, v := range want {
		if got["rxe0"][k] != v {
			t.Errorf("%s = %d, want %d", k, got["rxe0"][k], v)
		}
	}
	if _, err := ParseSummary([]byte(`{"not":"a list"}`)); err == nil {
		t.Error("accepted an object")
	}
	if _, err := ParseSummary([]byte(`[{"qp":1}]`)); err == nil {
		t.Error("accepted an entry without ifname")
	}
}

func TestParseObjects(t *testing.T) {
	count, _, err := ParseObjects(fixture(t, "rdma_resource_show_qp.json"), "rxe0")
	if err != nil {
		t.Fatal(err)
	}
	// Three RC QPs of the test process, and the kernel's GSI QP1.
	if count[102] != 3 || count[0] != 1 || len(count) != 2 {
		t.Errorf("QPs by task %v", count)
	}
	count, size, err := ParseObjects(fixture(t, "rdma_resource_show_mr.json"), "rxe0")
	if err != nil {
		t.Fatal(err)
	}
	if count[102] != 6 || size[102] != 6*4096 {
		t.Errorf("MRs by task %v, bytes %v", count, size)
	}
	if count, _, _ := ParseObjects(fixture(t, "rdma_resource_show_mr.json"), "mlx5_0"); len(count) != 0 {
		t.Errorf("other device's objects counted: %v", count)
	}
}

func TestCountsAndSubtract(t *testing.T) {
	c := Counts(map[string]uint64{"qp": 5, "cq": 9, "unknown": 7})
	if c["qp"] != 5 || c["cq"] != 9 || c["mr"] != 0 || len(c) != len(ResourceKinds) {
		t.Errorf("Counts %v", c)
	}
	d := Subtract(c, map[string]int{"qp": 1, "cq": 9})
	if d["qp"] != 4 || d["cq"] != 0 {
		t.Errorf("Subtract %v", d)
	}
}

func TestParseProcLimits(t *testing.T) {
	l := ParseProcLimits(fixture(t, "proc_limits.txt"))
	if l["Max open files"] != 20000 || l["Max locked memory"] != 8388608 || l["Max cpu time"] != -1 {
		t.Errorf("limits %v", l)
	}
}

func TestParseNetstat(t *testing.T) {
	ext := ParseNetstat(fixture(t, "proc_net_netstat.txt"))["TcpExt"]
	if _, ok := ext["ListenOverflows"]; !ok || ext["TW"] != 64707 || ext["PruneCalled"] != 1 {
		t.Errorf("TcpExt %v", ext)
	}
	if len(ParseNetstat([]byte("TcpExt: A B\nTcpExt: 1\n"))) != 0 {
		t.Error("mismatched header and values accepted")
	}
}

func TestParseTgid(t *testing.T) {
	if got := ParseTgid(fixture(t, "proc_status.txt")); got != 17709 {
		t.Errorf("Tgid %d", got)
	}
	if Tgid(os.Getpid()) != os.Getpid() {
		t.Error("Tgid of this process is not itself")
	}
}

func TestReadLimitsThisProcess(t *testing.T) {
	l := ReadLimits(os.Getpid())
	if l.NoFile <= 0 || l.MaxMapCount <= 0 || l.Somaxconn <= 0 || l.PidMax <= 0 || l.ThreadsMax <= 0 {
		t.Errorf("limits %+v", l)
	}
}

// A session samples this process and the host; a collector that fails
// (no such RDMA device here) records its error and the others go on.
func TestSessionSamples(t *testing.T) {
	s := Start(context.Background(), Config{Interval: 10 * time.Millisecond, Device: "nosuch0",
		Procs: func() []Proc { return []Proc{{Role: "server", PID: os.Getpid()}, {Role: "clients-0", PID: 1 << 22}} }})
	eventually.Within(5*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.samples) >= 3
	}) // Stop must run either way; the count is checked below
	samples, peak, errs := s.Stop()
	if len(samples) < 3 {
		t.Fatalf("%d samples", len(samples))
	}
	last := samples[len(samples)-1]
	if len(last.Procs) != 1 || last.Procs[0].PID != os.Getpid() {
		t.Fatalf("procs %+v (the exited one must be skipped)", last.Procs)
	}
	p := last.Procs[0]
	if p.RSS == 0 || p.Maps == 0 || p.FDs == 0 || p.Threads == 0 {
		t.Errorf("process sample %+v", p)
	}
	if last.HostMemUsed == 0 || last.T <= 0 {
		t.Errorf("host sample %+v", last)
	}
	if peak.ServerRSS < p.RSS || peak.ServerMaps == 0 {
		t.Errorf("peak %+v", peak)
	}
	if len(errs) != 2 || !strings.HasPrefix(errs[0], "device-counters: ") || !strings.HasPrefix(errs[1], "rdma: ") {
		t.Errorf("errors %v, want one from the rdma collector and one from the counters'", errs)
	}
	if s.DeviceCounters() != nil {
		t.Error("counters recorded for a device that has none")
	}
}

func TestPeaks(t *testing.T) {
	p := Peaks([]result.Sample{
		{RDMA: map[string]int{"qp": 3}, HostCPU: 50, Procs: []result.ProcSample{{Role: "server", RSS: 10, Maps: 7}}},
		{RDMA: map[string]int{"qp": 9}, HostCPU: 20, Procs: []result.ProcSample{{Role: "server", RSS: 5, Maps: 9}, {Role: "clients-0", RSS: 99}}},
	})
	if p.RDMA["qp"] != 9 || p.HostCPU != 50 || p.ServerRSS != 10 || p.ServerMaps != 9 {
		t.Errorf("peak %+v", p)
	}
}

// A count that was slow to read is reused for readingBudget times as long
// as it took, one that was quick for its minimum age; a forced sample
// reads afresh whatever the age.
func TestSlowReadingsAreReusedLonger(t *testing.T) {
	t0 := time.Unix(1000, 0)
	quick := reading{n: 1, at: t0, took: time.Millisecond}
	slow := reading{n: 1, at: t0, took: 100 * time.Millisecond}
	for _, c := range []struct {
		name   string
		r      reading
		minAge time.Duration
		after  time.Duration
		stale  bool
	}{
		{"quick, younger than its minimum age", quick, 2 * time.Second, time.Second, false},
		{"quick, past its minimum age", quick, 2 * time.Second, 2 * time.Second, true},
		{"quick, no minimum age", quick, 0, 50 * time.Millisecond, true},
		{"slow, past its minimum age but within its budget", slow, 2 * time.Second, 4 * time.Second, false},
		{"slow, past its budget", slow, 2 * time.Second, 5 * time.Second, true},
	} {
		if got := c.r.stale(t0.Add(c.after), c.minAge); got != c.stale {
			t.Errorf("%s: stale %v, want %v", c.name, got, c.stale)
		}
	}

	// Through the collector: counts are reused until stale, and Force
	// reads again.
	calls := 0
	read := func(int) (int, error) { calls++; return calls, nil }
	pc := newProcCollector(nil)
	for i := 0; i < 3; i++ {
		if n, err := pc.count(pc.maps, 1, time.Hour, read); err != nil || n != 1 {
			t.Fatalf("read %d: %d, %v; want the first reading, 1", i, n, err)
		}
	}
	pc.Force()
	if n, _ := pc.count(pc.maps, 1, time.Hour, read); n != 2 {
		t.Errorf("forced: %d, want a fresh reading, 2", n)
	}
}

// A tick reads again only once 50 times the last reading's cost has
// passed: 2 ms readings every 100 ms, 40 ms readings every 2 s.
func TestSampleBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		since, took time.Duration
		want        bool
	}{
		{0, 0, true},
		{500 * time.Millisecond, 2 * time.Millisecond, true},
		{100 * time.Millisecond, 2 * time.Millisecond, true},
		{99 * time.Millisecond, 2 * time.Millisecond, false},
		{500 * time.Millisecond, 40 * time.Millisecond, false},
		{2 * time.Second, 40 * time.Millisecond, true},
	} {
		if got := due(t0.Add(c.since), t0, c.took); got != c.want {
			t.Errorf("%v after a reading of %v: due %v, want %v", c.since, c.took, got, c.want)
		}
	}
}

// A server command's tree is sampled as one: a shell and the two
// processes it started are three processes, their RSS and threads summed.
func TestProcTreeIsSummed(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 600 & sleep 600 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	children := func() []int {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		out := []int{pid}
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
		return out
	}
	eventually.True(t, 30*time.Second, "the shell's two children", func() bool { return len(children()) == 3 })
	c := newProcCollector(func() []Proc { return []Proc{{Role: "server", PID: pid, Tree: children}} })
	c.Force()
	var s result.Sample
	if err := c.Collect(&s); err != nil {
		t.Fatal(err)
	}
	alone, err := newProcCollector(nil).readOne("server", pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Procs) != 1 {
		t.Fatalf("samples %+v", s.Procs)
	}
	ps := s.Procs[0]
	if ps.Processes != 3 || ps.PID != pid || ps.RSS <= alone.RSS || ps.Threads < 3 {
		t.Errorf("tree sample %+v, the shell alone %+v", ps, alone)
	}
}

// The OS comes from os-release's ID and VERSION_ID, quoted or not.
func TestOSRelease(t *testing.T) {
	p := t.TempDir() + "/os-release"
	if err := os.WriteFile(p, []byte("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n# a comment\nID=debian\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := osRelease(p); got != "debian 12" {
		t.Errorf("osRelease = %q, want %q", got, "debian 12")
	}
	if got := osRelease(t.TempDir() + "/none"); got != "" {
		t.Errorf("missing file: %q, want empty", got)
	}
	if _, err := os.Stat(osReleaseFile); err == nil {
		if env := Environment(); env.OS == "" || env.Kernel == "" {
			t.Errorf("Environment: OS %q, kernel %q; want both read on this machine", env.OS, env.Kernel)
		}
	}
}
