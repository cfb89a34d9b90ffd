package app

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// needVM skips when QEMU or the guest kernel is missing; CI installs both
// (scripts/setup.sh), so there these tests run.
// A run that fits the shared guest (2 vCPUs, 2 GiB, the default CPU and
// kernel) gets it, and must leave it as it found it.
func needVM(t *testing.T) {
	t.Helper()
	if ok, why := softroce.Available(); !ok {
		parts.Missing(t, "no Soft-RoCE guest: %s", why)
	}
	t.Cleanup(func() {
		if err := sharedGuest.Check(); err != nil {
			t.Error(err)
		}
	})
}

// ownGuest has t's runs boot their own guest even where they fit the
// shared one: t kills it.
func ownGuest(t *testing.T) {
	shared := sharedGuest
	sharedGuest = nil
	t.Cleanup(func() { sharedGuest = shared })
}

// 64 real clients on real rxe in the guest, with verified round trips;
// the guest boots with the extra kernel arguments asked for, and the
// point is calibrated inside the guest. A 1-client point before it is
// set against perftest's latency read just before it.
//
// Own boot: the kernel arguments and the console log are what it tests; rxe: the kernel's QP/CQ/MR counts and perftest beside the point.
func TestVMRealSoftRoCE(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "1,64", "--rounds", "2", "--traffic", "1s",
		"--vm-mem", "2048", "--vm-kernel-args", "mitigations=off  nosmt", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if r.Backend.Simulated || !strings.HasPrefix(r.Backend.Description, "vm: rxe0 on Linux ") ||
		!strings.Contains(r.Backend.Description, "kernel mitigations=off nosmt,") {
		t.Errorf("backend %+v", r.Backend)
	}
	logs, _ := filepath.Glob(filepath.Join(root, "*", "guest-console.log"))
	if len(logs) != 1 {
		t.Fatalf("guest console logs %v", logs)
	}
	if b, err := os.ReadFile(logs[0]); err != nil || !strings.Contains(string(b), " mitigations=off nosmt") {
		t.Errorf("guest kernel command line lacks the extra arguments (%v)", err)
	}
	if len(r.Points) != 2 {
		t.Fatalf("%d points, want 2 (1 and 64 clients)", len(r.Points))
	}
	one, p := r.Points[0], r.Points[1]
	if ref := one.LatencyReference; ref == nil || ref.Tool != "ib_send_lat" || ref.When != result.ReferencePoint ||
		ref.Error != "" || ref.Figures["t_typical"] <= 0 || !strings.Contains(ref.Command, "-s 4096") {
		t.Errorf("1-client point's perftest reading: %+v", one.LatencyReference)
	}
	if tr := one.Traffic; tr == nil || tr.Clients != 1 || tr.Messages < 1 || tr.Latency.P50 <= 0 {
		t.Errorf("1-client traffic phase %+v", one.Traffic)
	}
	if !strings.Contains(out+errOut, "reference (before the point): ib_send_lat 4096 B in one guest, rxe0 over its loopback: t_typical ") ||
		!strings.Contains(out+errOut, "s t_typical ") || !strings.Contains(out+errOut, ", read just before") {
		t.Errorf("the reading and the ratio are not printed:\n%s\n%s", out, errOut)
	}
	if p.LatencyReference != nil {
		t.Errorf("a 64-client point has a latency reading: %+v", p.LatencyReference)
	}
	if c := p.Calibration; c == nil || c.BeforeHS <= 0 || c.AfterHS <= 0 {
		t.Errorf("calibration in the guest: %+v", p.Calibration)
	}
	if p.Connected != 64 || p.SuccessRate != 1 {
		t.Fatalf("64 clients: %d connected, outcomes %v, errors %v", p.Connected, p.Outcomes, p.Errors)
	}
	if p.Server.PeakActive != 64 || p.Server.Released != 64 {
		t.Errorf("server view %+v", p.Server)
	}
	if d := r.Environment.Device; d == nil || d.Name != "rxe0" || d.Caps.MaxQP < 1000 || d.Port.GID.String() != "::ffff:127.0.0.1" {
		t.Errorf("device %+v", r.Environment.Device)
	}
	if ref := r.Environment.Reference; ref == nil || ref.Figures["usec/iter"] <= 0 {
		t.Errorf("reference check %+v", r.Environment.Reference)
	}
	// The guest kernel's own count proves the QPs existed: one per client
	// on each side, above the baseline taken before the point.
	if pk := p.Peak; pk == nil || pk.RDMA["qp"] != 128 {
		t.Errorf("peak RDMA resources above baseline: %+v, want 128 QPs (64 server + 64 client)", p.Peak)
	} else {
		srv, cl := pk.ByRole["server"], pk.ByRole["clients"]
		if srv["qp"] != 64 || srv["cq"] != 128 || srv["mr"] != 128 || cl["qp"] != 64 {
			t.Errorf("resources by process: server %v clients %v", srv, cl)
		}
		if pk.RDMA["qp"] != srv["qp"]+cl["qp"] {
			t.Errorf("netlink count %d != per-object dump %d+%d", pk.RDMA["qp"], srv["qp"], cl["qp"])
		}
	}
	if c := p.Cost; c == nil || c.QPs != 1 || c.CQs != 2 || c.MRs != 2 || c.RegisteredMem <= 0 {
		t.Errorf("per-client cost %+v, want 1 QP + 2 CQ + 2 MR", p.Cost)
	}
	var qemu bool
	for _, s := range p.Samples {
		for _, ps := range s.Procs {
			qemu = qemu || (ps.Role == "qemu" && ps.RSS > 0)
		}
	}
	if !qemu || len(p.SamplerErrors) != 0 {
		t.Errorf("QEMU seen from the host: %v; sampler errors %v", qemu, p.SamplerErrors)
	}
	// The traffic phase ran on rxe with every client, verified, and
	// nothing failed; perftest gave its yardsticks at the same size.
	if tr := p.Traffic; tr == nil || tr.Error != "" || tr.ErrorCount() != 0 || tr.Clients != 64 || tr.Messages < 64 ||
		tr.PerClient.Min <= 0 || tr.Latency.P50 <= 0 || !tr.SLOPassed {
		t.Errorf("traffic phase %+v", p.Traffic)
	}
	// Before the points and again after them (the host's speed drifts).
	var runs []string
	for _, ref := range r.Environment.DataPath {
		runs = append(runs, ref.Tool+" "+ref.When)
		if ref.Error != "" || (ref.Figures["t_typical"] <= 0 && ref.Figures["msg/s"] <= 0) {
			t.Errorf("%s: %+v", ref.Tool, ref)
		}
	}
	if want := "ib_send_lat before, ib_send_bw before, ib_send_lat after, ib_send_bw after"; strings.Join(runs, ", ") != want {
		t.Errorf("data path references %q, want %q", runs, want)
	}
	qpns := map[uint32]bool{}
	for _, rec := range p.Records {
		if rec.RemoteQPN == 0 || qpns[rec.RemoteQPN] {
			t.Fatalf("server QPN %d missing or repeated", rec.RemoteQPN)
		}
		qpns[rec.RemoteQPN] = true
		if len(rec.RTTsUS) != 2 {
			t.Fatalf("record without 2 verified round trips: %+v", rec)
		}
	}
}

// A real resource limit (vm.max_map_count lowered in the guest) fails QP
// creation with the verb and errno recorded. (Clients over --max-clients
// refused on rxe: TestVMTargetServeAgrees; on sim: TestRampClassifiesRefusals.)
//
// Guest, shared: a real kernel limit failing ibv_create_qp with ENOMEM; sim only emulates caps.
func TestVMRealLimits(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "200", "--rounds", "1",
		// Three load generators of 67 clients at most stay below the
		// limit, so the server (200 clients) meets it first; one generator
		// would race the server to it and the Go runtime could die instead.
		// Eight attempts in flight per generator keep a loaded host from
		// timing clients out while they queue, so every failure below is
		// the wall's.
		"--procs", "3", "--inflight", "8", "--vm-mem", "2048", "--vm-no-reference", "--vm-max-map-count", "600", "--traffic", "0", "--calibrate", "0",
		"--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	p := loadOnlyRun(t, root).Points[0]
	if p.Outcomes[result.OutcomeQPCreate] == 0 {
		t.Fatalf("max_map_count 600: no qp-create failures; outcomes %v errors %v", p.Outcomes, p.Errors)
	}
	var withErrno int
	for _, rec := range p.Records {
		if rec.Outcome == result.OutcomeQPCreate && rec.Errno == "ENOMEM" && strings.Contains(rec.Error, "ibv_create_") {
			withErrno++
		}
	}
	if withErrno == 0 {
		t.Errorf("qp-create failures do not name the verb and ENOMEM: %v", p.Errors)
	}
	// Past the wall the rest are refused as such, on the count that
	// found the wall: not at the client timeout, and without the server
	// counting its mappings again for each of them.
	if failed := p.Attempted - p.Connected; p.Outcomes[result.OutcomeQPCreate] != failed || withErrno != failed {
		t.Errorf("of %d failed clients %d were refused at the wall (qp-create ENOMEM): outcomes %v", failed, withErrno, p.Outcomes)
	}
	if p.Server.MapCounts == 0 || p.Server.MapCounts >= withErrno {
		t.Errorf("the server counted its mappings %d times for %d refusals at the wall; want fewer than one per refusal", p.Server.MapCounts, withErrno)
	}
	if d := p.Diagnosis; d == nil || d.Limit != "vm.max_map_count" || !strings.Contains(d.Summary, "of vm.max_map_count 600") {
		t.Errorf("diagnosis %+v, want vm.max_map_count with the mappings as evidence", p.Diagnosis)
	}
}

// --sim-in-vm runs the simulated fabric inside the guest, where the tool
// is root and open files are not capped by the host; it stays labelled
// simulated and counts no RDMA device.
//
// Guest, shared: the guest's kernel and limits around the sim fabric, which the host's sim cannot show.
func TestSimInVM(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "sim", "--sim-in-vm", "--clients", "40", "--mode", "srq",
		"--traffic", "0", "--calibrate", "0", "--vm-mem", "2048", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if !r.Backend.Simulated || r.Backend.Name != "sim" || !strings.Contains(r.Backend.Description, "in a QEMU guest on Linux") {
		t.Errorf("backend %+v", r.Backend)
	}
	if r.Environment.Guest == nil || r.Environment.Reference != nil {
		t.Errorf("guest %+v, reference %+v: want the guest recorded and no RDMA reference run", r.Environment.Guest, r.Environment.Reference)
	}
	p := r.Points[0]
	if p.Connected != 40 || p.Server.PeakActive != 40 {
		t.Fatalf("40 clients: %d connected, server %+v, errors %v", p.Connected, p.Server, p.Errors)
	}
	if pk := p.Peak; pk != nil && pk.RDMA["qp"] != 0 {
		t.Errorf("kernel RDMA resources counted for a simulated fabric: %v", pk.RDMA)
	}
	if !strings.Contains(out, "[simulated]") {
		t.Errorf("point line not marked simulated:\n%s", out)
	}
	if _, errOut, code := run(t, "ramp", "--backend", "vm", "--sim-in-vm", "--results", t.TempDir()); code == 0 || !strings.Contains(errOut, "goes with --backend sim") {
		t.Errorf("--sim-in-vm with --backend vm: exit %d, %q", code, errOut)
	}
}

// The bench suite runs inside the guest on rxe0 and leaves a bench file
// with all three measurements at both concurrencies, and its report.
// One pass of each: TestBenchSim pools two.
//
// Guest, shared: the bench suite's figures on rxe0 under the guest's CPU emulation.
func TestVMBench(t *testing.T) {
	needVM(t)
	checkBench(t, "vm", "--backend", "vm", "--vm-mem", "2048", "--passes", "1")
}

// A guest that cannot boot (a CPU model QEMU does not know): the run
// never started, so its directory keeps only the console log and a
// run.json that says why, which report says in one line.
//
// Own boot: the boot is what fails.
func TestVMBootFailureSaysWhy(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	_, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "5", "--vm-cpu-model", "no-such-cpu", "--results", root)
	runs, _ := filepath.Glob(filepath.Join(root, "*", result.FileName))
	if code != ExitRunError || strings.Count(errOut, "\n") != 1 || len(runs) != 1 || !strings.Contains(errOut, runs[0]) {
		t.Fatalf("exit %d, stderr %q, runs %v; want %d, one line naming the one run.json", code, errOut, runs, ExitRunError)
	}
	r, err := result.Load(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Error, result.NotStarted) || len(r.Points) != 0 {
		t.Errorf("run.json: error %q, %d points", r.Error, len(r.Points))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(runs[0]), "guest-console.log")); err != nil {
		t.Error(err)
	}
	_, errOut, code = run(t, "report", runs[0], "--report-dir", t.TempDir())
	if code != ExitRunError || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "the run never started: ") {
		t.Errorf("report: exit %d, stderr %q", code, errOut)
	}
	noChildren(t)
}

// lockedBuffer is a bytes.Buffer a test reads while a command writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Ctrl-C during a point in the guest: the host cancels the guest's
// point, the guest stops its generators and answers with the outcomes
// its clients had, and the run keeps that point cut short, with its
// records, beside the guest's and the host's samples.
//
// Guest, shared: the agent answers a cancelled point across the serial line; the host's sim has no guest to answer.
func TestVMInterruptedPointComesBack(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	cmd := runAsync(t, "ramp", "--backend", "vm", "--clients", "3000", "--connect-rate", "40",
		"--rounds", "1", "--traffic", "0", "--calibrate", "0", "--vm-mem", "2048", "--vm-no-reference", "--results", root, "--events", "-")
	// The event stream's progress (once a second, where the human
	// output has a line every 30 s): clients connected in the guest.
	connected := func() bool { return progressConnected(cmd.out.String()) >= 10 }
	if !eventually.Within(5*time.Minute, connected) {
		cmd.interrupt()
		r := <-cmd.done
		t.Fatalf("no progress from the guest's point:\n%s\n%s", r.out, r.errOut)
	}
	cmd.interrupt()
	if r := <-cmd.done; r.code != ExitInterrupted {
		t.Errorf("exit %d, want %d\n%s", r.code, ExitInterrupted, r.errOut)
	}
	run := loadOnlyRun(t, root)
	p := run.Interrupted
	if len(run.Points) != 0 || p == nil {
		t.Fatalf("points %v, interrupted %+v", clientsOf(run), p)
	}
	// "interrupted", not a dead guest's error: the guest answered.
	if !p.Interrupted || p.Error != "interrupted" || p.Connected == 0 || len(p.Records) != p.Attempted || p.Attempted >= 3000 {
		t.Errorf("point cut short: interrupted %v, error %q, %d/%d connected, %d records",
			p.Interrupted, p.Error, p.Connected, p.Attempted, len(p.Records))
	}
	qemu := false
	for _, s := range p.Samples {
		for _, pr := range s.Procs {
			qemu = qemu || pr.Role == "qemu"
		}
	}
	if len(p.Samples) == 0 || !qemu {
		t.Errorf("%d samples, QEMU's among them: %v", len(p.Samples), qemu)
	}
	noChildren(t)
}

// ud beside srq on real rxe: the guest's perftest runs over UD QPs too
// (-c UD), before and after the points and before ud's 1-client point,
// and each design's report section sets its traffic against its own
// transport's figures.
//
// Guest, shared: perftest over RC and UD QPs on rxe0.
func TestVMReferencesPerTransport(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--mode", "srq,ud", "--clients", "1", "--traffic", "250ms",
		"--msg-size", "64", "--calibrate", "0", "--vm-mem", "2048", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	var refs []string
	for _, ref := range r.Environment.DataPath {
		refs = append(refs, ref.Tool+" "+ref.Transport+" "+ref.When)
		if ref.Error != "" || (ref.Figures["t_typical"] <= 0 && ref.Figures["msg/s"] <= 0) ||
			(ref.Transport == result.TransportUD) != strings.Contains(ref.Command, " -c UD ") {
			t.Errorf("%s: %+v", ref.Tool, ref)
		}
	}
	want := "ib_send_lat  before, ib_send_bw  before, ib_send_lat UD before, ib_send_bw UD before, " +
		"ib_send_lat  after, ib_send_bw  after, ib_send_lat UD after, ib_send_bw UD after"
	if strings.Join(refs, ", ") != want {
		t.Errorf("data path references %q, want %q", strings.Join(refs, ", "), want)
	}
	if len(r.Points) != 2 {
		t.Fatalf("%d points, want srq's and ud's", len(r.Points))
	}
	for _, p := range r.Points {
		ref := p.LatencyReference
		if ref == nil || ref.Error != "" || ref.Transport != result.TransportOf(p.Design) || ref.Figures["t_typical"] <= 0 {
			t.Errorf("%s's 1-client reading: %+v", p.Design, ref)
		}
		if tr := p.Traffic; tr == nil || tr.ErrorCount() != 0 || tr.Messages < 1 {
			t.Errorf("%s's traffic: %+v", p.Design, tr)
		}
	}
	if !strings.Contains(out+errOut, "reference (before the point): ib_send_lat -c UD 64 B in one guest") {
		t.Errorf("ud's reading is not printed:\n%s\n%s", out, errOut)
	}
	md, err := os.ReadFile(filepath.Join(filepath.Dir(loadPath(t, root)), "report-ud.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "-F -c UD -s 64 -n 5000") || strings.Contains(string(md), "-F -s 64 -n 5000") {
		t.Errorf("report-ud.md does not set ud against perftest over UD:\n%s", md)
	}
}

// An rxe point records the port's own counters before and after, and
// their per-second rates while it runs: rxe counts the packets its
// clients and server really sent and received on rxe0 (both sides, one
// device), which the sim, with no wire, has none of. With
// --vm-no-reference the run takes no reference tool: none is recorded
// or printed (TestVMRealSoftRoCE has them by default).
//
// Guest, shared: rxe's own port counters of packets sent and received.
func TestVMDeviceCounters(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "4", "--traffic", "1s",
		"--msg-size", "64", "--calibrate", "0", "--vm-mem", "2048", "--vm-no-reference", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if r.Environment.Reference != nil || len(r.Environment.DataPath) != 0 || strings.Contains(out, "reference") {
		t.Errorf("--vm-no-reference: reference %+v, data path %+v recorded\n%s", r.Environment.Reference, r.Environment.DataPath, out)
	}
	p := r.Points[0]
	dc := p.DeviceCounters
	if dc == nil || dc.Device != "rxe0" || dc.Source != "sysfs" || !dc.Shared {
		t.Fatalf("device counters %+v, sampler errors %v", dc, p.SamplerErrors)
	}
	rise := dc.Rise()
	if _, ok := dc.Before["rcvd_rnr_err"]; !ok || rise["sent_pkts"] == 0 || rise["rcvd_pkts"] == 0 {
		t.Errorf("rxe's counters before %v, rise %v: want rcvd_rnr_err read and packets sent and received", dc.Before, rise)
	}
	var rated bool
	for _, s := range p.Samples {
		rated = rated || s.Counters["sent_pkts"] > 0
	}
	if !rated {
		t.Error("no sample holds a per-second packet rate")
	}
}

// A receive shortage planted on rxe (issue 53): an SRQ of 2 buffers
// against 32 clients that each keep a message outstanding. The SRQ runs
// dry, rxe answers with RNR NAKs (send_rnr_err on the responder,
// rcvd_rnr_err on the requester: one device here, so both), and the
// requesters wait out the RNR timer. On the TCG guest that starves
// clients rather than the server, whose CPU bounds the aggregate rate
// anyway: the rate holds, and the tail latency goes from tens of
// milliseconds to seconds. So the SLO is a p99, and the verdict names
// RNR NAKs as what rose from the last count that met it, 2 clients,
// whose 2 messages the SRQ holds, to the first that did not.
//
// Guest, shared: rxe's RNR NAKs and its counters of them.
func TestVMSRQShortageShowsRNR(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--mode", "srq", "--srq-depth", "2", "--depth", "1",
		"--clients", "2,32", "--traffic", "1s", "--slo", "p99<=500ms", "--msg-size", "64", "--calibrate", "0",
		"--vm-mem", "2048", "--vm-no-reference", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	rnr := map[int]uint64{}
	for _, p := range r.Points {
		rise := p.DeviceCounters.Rise()
		rnr[p.Clients] += rise["rcvd_rnr_err"] + rise["send_rnr_err"]
	}
	if rnr[32] == 0 {
		t.Fatalf("no RNR NAK at 32 clients against 2 buffers: %v\n%s", rnr, out)
	}
	d := r.Verdict.Designs[0]
	if d.MaxSustainable != 2 || d.SLOMissedAt != 32 || d.SLOCauseKind != analysis.BendRNR {
		t.Fatalf("max sustainable %d, missed at %d because %s (%s); want 2, 32 and RNR (RNR NAKs %v)\n%s",
			d.MaxSustainable, d.SLOMissedAt, d.SLOCauseKind, d.SLOCause, rnr, out)
	}
	if !strings.Contains(out, "why: RNR NAKs: receives not posted in time rose") {
		t.Errorf("the verdict does not name RNR:\n%s", out)
	}
	if b := d.Bend; b != nil && b.BendAt != 0 && b.CauseKind != analysis.BendRNR {
		t.Errorf("the rate bent at %d, for %s (%s)", b.BendAt, b.CauseKind, b.Cause)
	}
}

// --vm-mem is checked against the host's available memory before any
// guest boots, and --vm-peer's two guests for twice it: a usage error
// in one line, with nothing saved.
func TestVMMemCheckedBeforeBoot(t *testing.T) {
	needVM(t)
	avail := collectors.MemInfo()["MemAvailable"] >> 20
	if avail == 0 {
		t.Skip("no /proc/meminfo")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--vm-mem", strconv.Itoa(int(avail) * 4)}, "--vm-mem " + analysis.Thousands(int(avail)*4) + " MiB does not fit in this host's memory"},
		{[]string{"--vm-peer", "--vm-mem", strconv.Itoa(int(avail) * 3 / 4)}, "--vm-peer's two guests of --vm-mem"},
	} {
		root := t.TempDir()
		_, errOut, code := run(t, append([]string{"ramp", "--backend", "vm", "--clients", "5", "--results", root}, c.args...)...)
		runs, _ := filepath.Glob(filepath.Join(root, "*", result.FileName))
		if code != ExitUsage || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) || len(runs) != 0 {
			t.Errorf("%v: exit %d, stderr %q, runs %v; want %d, one line saying %q", c.args, code, errOut, runs, ExitUsage, c.want)
		}
	}
}

// A point that fills the guest's memory is the memory wall, named with
// the kernel's evidence, not a dead process with no diagnosis: in a
// 384 MiB guest 300 per-client clients with 256 KiB messages register
// (and so pin) more than the guest has, and the OOM killer ends the
// load generator or the server.
//
// Own boot: a guest of its own size, the OOM killer's run inside it.
func TestVMOutOfMemoryIsMemory(t *testing.T) {
	needVM(t)
	ownGuest(t)
	root := t.TempDir()
	_, errOut, code := run(t, "ramp", "--backend", "vm", "--vm-mem", "384", "--vm-no-reference", "--clients", "300", "--msg-size", "262144",
		"--rounds", "1", "--traffic", "0", "--results", root)
	runs, _ := filepath.Glob(filepath.Join(root, "*", result.FileName))
	if code != ExitMeasured || len(runs) != 1 {
		t.Fatalf("exit %d, runs %v\n%s", code, runs, errOut)
	}
	r, err := result.Load(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	pt := r.Points[0]
	if k := pt.KernelMemory; k == nil || k.OOMKills == 0 || k.Before["MemTotal"] > 384<<20 {
		t.Fatalf("kernel memory %+v", k)
	}
	d := pt.Diagnosis
	if d == nil || d.Limit != "memory" || !strings.Contains(d.Summary, "OOM killer killed") || !strings.Contains(d.Summary, "signal: killed") {
		t.Fatalf("diagnosis %+v", d)
	}
	if ev := strings.Join(d.Evidence, "\n"); !strings.Contains(ev, "oom_kill rose by") || !strings.Contains(ev, "the kernel said: Out of memory: Killed process") {
		t.Errorf("evidence:\n%s", ev)
	}
	noChildren(t)
}

// A staircase on rxe in the shared guest: the guest's agent holds the
// climb's server and load generators between the steps, each step adds
// its clients on top of those held (the server's own view counts them
// all at once), a fresh point confirms the top, and the guest is left
// as the climb found it (needVM checks).
//
// Guest, shared: the agent holds the climb between steps, and the kernel counts the device's QPs at each.
func TestVMStaircase(t *testing.T) {
	needVM(t)
	root, profiles := t.TempDir(), t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--staircase", "--clients", "5,10,20", "--traffic", "250ms",
		"--msg-size", "64", "--calibrate", "0", "--vm-mem", "2048", "--vm-no-reference", "--results", root, "--profile", profiles)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// Copied out of the guest once the climb's processes exited.
	climbProfiled(t, profiles, "20-1-server.pprof")
	r := loadOnlyRun(t, root)
	var got []string
	for _, p := range r.Points {
		split := p.Peak != nil && p.Peak.ByRole["server"] != nil
		qps := 0
		if p.Peak != nil {
			qps = p.Peak.RDMA["qp"] + p.Peak.Baseline["qp"]
		}
		got = append(got, fmt.Sprintf("%d %v %d/%d held %d, peak %d, %d records, traffic over %d, split %v, device's QPs %d",
			p.Clients, p.Cumulative, p.Connected, p.Attempted, p.Held, p.Server.PeakActive, len(p.Records), trafficClients(p),
			split, qps))
	}
	// Only the first step and the fresh point split the device's
	// objects by process; the device's count (two QPs a client and its
	// own QP 1) covers every step.
	want := []string{
		"5 true 5/5 held 0, peak 5, 5 records, traffic over 5, split true, device's QPs 11",
		"10 true 10/10 held 5, peak 10, 5 records, traffic over 10, split false, device's QPs 21",
		"20 true 20/20 held 10, peak 20, 10 records, traffic over 20, split false, device's QPs 41",
		"20 false 20/20 held 0, peak 20, 20 records, traffic over 20, split true, device's QPs 41",
	}
	if !slices.Equal(got, want) {
		t.Errorf("points\n got %q\nwant %q\n%s", got, want, out)
	}
	if ids := r.Points[1].Records; len(ids) == 0 || ids[0].ID != 5 {
		t.Errorf("the second step's records %+v: want its own clients, from ID 5", ids)
	}
}

func trafficClients(p result.Point) int {
	if p.Traffic == nil {
		return 0
	}
	return p.Traffic.Clients
}
