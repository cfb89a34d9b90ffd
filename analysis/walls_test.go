package analysis

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// wallsRun is a vm run of srq points on rxe's caps: 10,000 clients held
// in 4 generators, each costing what srq runs have shown (server 10 KiB,
// 1 mapping per client in the server and in a generator, 2 QPs on the
// shared device), in a 12 GiB guest on a 24 GiB host.
func wallsRun() *result.Run {
	const n = 10000
	gib := uint64(1 << 30)
	first := []result.ProcSample{{Role: "server", RSS: 20 << 20, Maps: 200, FDs: 20}}
	peak := []result.ProcSample{{Role: "server", RSS: 20<<20 + n*10240, Maps: 200 + n, FDs: 20 + n}}
	for i := range 4 {
		role := "clients-" + string(rune('0'+i))
		first = append(first, result.ProcSample{Role: role, RSS: 30 << 20, Maps: 150, FDs: 15})
		peak = append(peak, result.ProcSample{Role: role, RSS: 30<<20 + n/4*20480, Maps: 150 + n/4, FDs: 15 + n/4})
	}
	pt := result.Point{Clients: n, Attempted: n, Connected: n, Passed: true,
		Samples: []result.Sample{{Procs: first}, {Procs: peak}},
		Peak:    &result.Peak{RDMA: map[string]int{"qp": 2 * n, "cq": 8, "mr": n / 16}, Baseline: map[string]int{"qp": 0}},
		Limits: &result.Limits{MaxMapCount: 1000000, NoFile: 1 << 20,
			DeviceCaps: map[string]int64{"max_qp": 1048560, "max_cq": 1 << 20, "max_mr": 524287, "max_ah": 32767}},
		DeviceCounters: &result.DeviceCounters{Shared: true},
		KernelMemory: &result.KernelMemory{
			Before: map[string]uint64{"MemTotal": 12 * gib, "MemAvailable": 11 * gib, "Slab": 100 << 20},
			Loaded: map[string]uint64{"MemTotal": 12 * gib, "MemAvailable": 11*gib - n*65536, "Slab": 100<<20 + n*20480},
		}}
	small := pt
	small.Clients, small.Connected, small.Attempted = 100, 100, 100
	return &result.Run{Backend: result.Backend{Name: "vm"}, Environment: result.Environment{MemoryBytes: 24 * gib},
		Points: []result.Point{small, pt}}
}

// The walls come from the largest point that held its clients, sorted,
// each its bound over its per-client cost.
func TestProjectWalls(t *testing.T) {
	pr := ProjectWalls(wallsRun())
	if pr == nil || pr.From != 10000 || pr.Procs != 4 {
		t.Fatalf("projection %+v", pr)
	}
	if pr.ServerRSS != 10240 || pr.GeneratorRSS != 20480 || pr.Kernel != 20480 || pr.MemAvailable != 65536 || pr.QPs != 2 {
		t.Errorf("costs: server %g, generators %g, kernel %g, MemAvailable %g bytes, QPs %g per client",
			pr.ServerRSS, pr.GeneratorRSS, pr.Kernel, pr.MemAvailable, pr.QPs)
	}
	want := []struct {
		limit, who string
		clients    int
	}{
		{"memory", "the guest", 11 << 30 / 65536},                 // 180,224
		{"host-memory", "the host", (24<<30 - 1<<30) / 65536},     // 376,832
		{"device-cap:max_qp", "the device", 1048560 / 2},          // 524,280
		{"vm.max_map_count", "the server process", 1000000 - 200}, // 999,800
		{"rlimit-nofile", "the server process", 1<<20 - 20},       // 1,048,556
		{"vm.max_map_count", "each of 4 load generators", (1000000 - 150) * 4},
		{"rlimit-nofile", "each of 4 load generators", (1<<20 - 15) * 4},
		{"device-cap:max_mr", "the device", 524287 * 16},
		{"device-cap:max_cq", "the device", (1 << 20) * 10000 / 8},
	}
	if len(pr.Walls) != len(want) {
		for _, w := range pr.Walls {
			t.Logf("%+v", w)
		}
		t.Fatalf("%d walls, want %d", len(pr.Walls), len(want))
	}
	for i, w := range want {
		if g := pr.Walls[i]; g.Limit != w.limit || g.Who != w.who || g.Clients != w.clients {
			t.Errorf("wall %d: %s of %s at %d, want %s of %s at %d", i, g.Limit, g.Who, g.Clients, w.limit, w.who, w.clients)
		}
	}
	line := pr.Line()
	for _, s := range []string{"projected walls, from the costs at 10,000 clients: memory at 180,224 (the guest, 64.0 KiB per client)", "device-cap:max_qp at 524,280 (the device, 2 QPs per client)"} {
		if !strings.Contains(line, s) {
			t.Errorf("line %q lacks %q", line, s)
		}
	}
	if w := pr.Walls[len(pr.Walls)-1]; w.PerText() != "0.0008 CQs" {
		t.Errorf("8 CQs among 10,000 clients: %q per client", w.PerText())
	}
	if strings.Contains(line, "simulated") {
		t.Errorf("a vm run's line says simulated: %q", line)
	}
}

// A sim run's projection says it is simulated; a run whose points all
// failed has none.
func TestProjectWallsSimulatedOrNone(t *testing.T) {
	run := wallsRun()
	run.Backend = result.Backend{Name: "sim", Simulated: true}
	if pr := ProjectWalls(run); pr == nil || !strings.HasPrefix(pr.Line(), "(simulated) projected walls") {
		t.Errorf("sim projection %+v", pr)
	}
	for i := range run.Points {
		run.Points[i].Passed = false
	}
	if pr := ProjectWalls(run); pr != nil {
		t.Errorf("no point passed, yet %+v", pr)
	}
}

// Load generators on other hosts (--vm-peer's guest) are projected from
// their own readings with the clients held, against their hosts' limits.
func TestProjectWallsRemoteGenerators(t *testing.T) {
	run := wallsRun()
	pt := &run.Points[1]
	var procs []result.ProcSample
	for _, ps := range pt.Samples[1].Procs {
		if ps.Role == "server" {
			procs = append(procs, ps)
		}
	}
	pt.Samples[1].Procs = procs
	pt.Samples[0].Procs = pt.Samples[0].Procs[:1]
	lim := map[string]string{"vm.max_map_count": "65530", "RLIMIT_NOFILE": "1048576"}
	pt.Hosts = []result.HostPoint{{Host: "peer", Usage: []result.GeneratorUsage{
		{RSS: 100 << 20, Maps: 5000, FDs: 5010, Limits: lim}, {RSS: 100 << 20, Maps: 5000, FDs: 5010, Limits: lim}}}}
	pr := ProjectWalls(run)
	if pr == nil || pr.Procs != 2 || pr.GeneratorMaps != 1 {
		t.Fatalf("projection %+v", pr)
	}
	var found bool
	for _, w := range pr.Walls {
		if w.Limit == "vm.max_map_count" && w.Who == "each of 2 load generators on their hosts" {
			found = w.Clients == 2*65530
		}
	}
	if !found {
		t.Errorf("no generator map wall at 131,060: %+v", pr.Walls)
	}
}
