package analysis

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// ProjectedWall is one limit the clients would exhaust, projected from
// what each client cost at a point that held them: at PerClient of
// Bound each, it runs out at Clients.
type ProjectedWall struct {
	// Limit is keyed as a diagnosis names it: "device-cap:max_qp",
	// "memory", "host-memory", "vm.max_map_count", "rlimit-nofile";
	// Who says whose it is ("the device", "the server process", "each
	// of 4 load generators").
	Limit, Who string
	PerClient  float64
	Bound      float64
	// Unit is what PerClient and Bound count: "QPs", "bytes", "mappings", "fds".
	Unit    string
	Clients int
	// Note says how the bound was taken, and what would move it.
	Note string
}

// Projection is the per-client cost at the largest count that held all
// it asked for, and the walls it predicts, first wall first.
type Projection struct {
	// From is the point projected from: its clients connected.
	From      int
	Simulated bool
	// Per-client costs, in bytes: the server's RSS growth, the load
	// generators' together, the kernel's own memory (slab, vmalloc, page
	// tables, stacks) and the machine's MemAvailable drop (absent: 0).
	ServerRSS, GeneratorRSS, Kernel, MemAvailable float64
	// Mappings and fds per client: the server's, and one load
	// generator's per client it holds; Procs is how many generators.
	ServerMaps, GeneratorMaps, ServerFDs, GeneratorFDs float64
	Procs                                              int
	// QPs per client on the device (both ends when they share it).
	QPs   float64
	Walls []ProjectedWall
}

// ProjectWalls projects the walls of run from its largest fresh point
// that passed with every client it asked for connected; nil when none
// has the samples to project from.
func ProjectWalls(run *result.Run) *Projection {
	var from *result.Point
	for i := range run.Points {
		p := &run.Points[i]
		if p.Cumulative || p.Interrupted || !p.Passed || p.Error != "" || p.Connected == 0 || p.Peak == nil || len(p.Samples) == 0 {
			continue
		}
		if from == nil || p.Connected > from.Connected {
			from = p
		}
	}
	if from == nil {
		return nil
	}
	pr := &Projection{From: from.Connected, Simulated: run.Backend.Simulated}
	pr.project(run, *from)
	if len(pr.Walls) == 0 {
		return nil
	}
	sort.SliceStable(pr.Walls, func(i, j int) bool { return pr.Walls[i].Clients < pr.Walls[j].Clients })
	return pr
}

// procGrowth is one process's first and highest readings in a point.
type procGrowth struct {
	first, peak result.ProcSample
	seen        bool
}

func (pr *Projection) project(run *result.Run, p result.Point) {
	n := float64(p.Connected)
	procs := map[string]*procGrowth{}
	for _, s := range p.Samples {
		for _, ps := range s.Procs {
			g := procs[ps.Role]
			if g == nil {
				g = &procGrowth{first: ps, seen: true}
				procs[ps.Role] = g
			}
			g.peak.RSS, g.peak.Maps, g.peak.FDs = max(g.peak.RSS, ps.RSS), max(g.peak.Maps, ps.Maps), max(g.peak.FDs, ps.FDs)
		}
	}
	limits := result.Limits{}
	if p.Limits != nil {
		limits = *p.Limits
	}

	// The server's process.
	if g := procs["server"]; g != nil {
		pr.ServerRSS = growth(g.first.RSS, g.peak.RSS) / n
		pr.ServerMaps = float64(g.peak.Maps-min(g.first.Maps, g.peak.Maps)) / n
		pr.ServerFDs = float64(g.peak.FDs-min(g.first.FDs, g.peak.FDs)) / n
		pr.add("vm.max_map_count", "the server process", pr.ServerMaps, limits.MaxMapCount, g.first.Maps, 1, "mappings",
			"vm.max_map_count per process")
		pr.add("rlimit-nofile", "the server process", pr.ServerFDs, limits.NoFile, g.first.FDs, 1, "fds",
			"RLIMIT_NOFILE")
	}
	// The load generators here: each holds its share of the clients.
	var gens []*procGrowth
	for role, g := range procs {
		if strings.HasPrefix(role, "clients-") {
			gens = append(gens, g)
		}
	}
	if len(gens) > 0 {
		pr.Procs = len(gens)
		per := n / float64(len(gens))
		var maps, fds, base, baseFDs float64
		for _, g := range gens {
			pr.GeneratorRSS += growth(g.first.RSS, g.peak.RSS) / n
			maps = math.Max(maps, float64(g.peak.Maps-min(g.first.Maps, g.peak.Maps))/per)
			fds = math.Max(fds, float64(g.peak.FDs-min(g.first.FDs, g.peak.FDs))/per)
			base, baseFDs = math.Max(base, float64(g.first.Maps)), math.Max(baseFDs, float64(g.first.FDs))
		}
		pr.GeneratorMaps, pr.GeneratorFDs = maps, fds
		who := "each load generator"
		if len(gens) > 1 {
			who = fmt.Sprintf("each of %d load generators", len(gens))
		}
		pr.add("vm.max_map_count", who, maps, limits.MaxMapCount, int(base), len(gens), "mappings",
			fmt.Sprintf("vm.max_map_count per process; --procs P holds N/P clients each, so N clients need --procs ≥ N × %s / %s", trim2(maps), Thousands(int(limits.MaxMapCount))))
		pr.add("rlimit-nofile", who, fds, limits.NoFile, int(baseFDs), len(gens), "fds", "RLIMIT_NOFILE per process, as the server's")
	}

	if len(gens) == 0 {
		pr.remoteGenerators(p, n)
	}

	// The device's objects, against its caps.
	caps := limits.DeviceCaps
	if caps == nil && run.Environment.Device != nil {
		caps = deviceCaps(run.Environment.Device)
	}
	shared := p.DeviceCounters != nil && p.DeviceCounters.Shared
	for _, k := range []string{"qp", "cq", "mr", "ah"} {
		held, base := deviceHeld(p, k, shared)
		if held <= 0 {
			continue
		}
		per := float64(held) / n
		if k == "qp" {
			pr.QPs = per
		}
		who := "the device"
		if p.Peak.RDMA == nil {
			who = "the server's device"
		}
		note := "the device's cap"
		if shared {
			note += "; server and clients on one device, both ends counted"
		}
		pr.add("device-cap:max_"+k, who, per, caps["max_"+k], base, 1, strings.ToUpper(k)+"s", note)
	}

	// Memory: the machine's (the guest's on vm), and the host's that
	// bounds the guest's.
	if k := p.KernelMemory; k != nil && k.Loaded != nil {
		pr.Kernel = growth(result.KernelHeld(k.Before), result.KernelHeld(k.Loaded)) / n
		pr.MemAvailable = growth(k.Loaded["MemAvailable"], k.Before["MemAvailable"]) / n
		machine := "the machine"
		if run.Backend.Name == "vm" {
			machine = "the guest"
		}
		pr.addMem("memory", machine, pr.MemAvailable, float64(k.Before["MemAvailable"]),
			fmt.Sprintf("MemAvailable before the point, of MemTotal %s; per client its drop with the clients held (every process and the kernel)", bytesText(k.Before["MemTotal"])))
		if host := run.Environment.MemoryBytes; run.Backend.Name == "vm" && host > 0 {
			guests := uint64(1)
			if len(run.Hosts) > 0 {
				guests = 2 // --vm-peer: a second guest with as much
			}
			used := k.Before["MemTotal"] - min(k.Before["MemAvailable"], k.Before["MemTotal"])
			if room := host/guests - min(used, host/guests); room > 0 {
				pr.addMem("host-memory", "the host", pr.MemAvailable, float64(room),
					fmt.Sprintf("--vm-mem at most the host's %s%s, less what the guest used before the point", bytesText(host), map[bool]string{true: " split between two guests (--vm-peer)"}[guests == 2]))
			}
		}
	}
}

// add projects a wall of count objects of bound, base of which a process
// held before its clients, per each of procs processes.
func (pr *Projection) add(limit, who string, per float64, bound int64, base, procs int, unit, note string) {
	if per <= 0 || bound <= 0 {
		return
	}
	room := float64(bound) - float64(base)
	if room <= 0 {
		return
	}
	pr.Walls = append(pr.Walls, ProjectedWall{Limit: limit, Who: who, PerClient: per, Bound: float64(bound), Unit: unit,
		Clients: int(room / per * float64(procs)), Note: note})
}

func (pr *Projection) addMem(limit, who string, per, room float64, note string) {
	if per <= 0 || room <= 0 {
		return
	}
	pr.Walls = append(pr.Walls, ProjectedWall{Limit: limit, Who: who, PerClient: per, Bound: room, Unit: "bytes",
		Clients: int(room / per), Note: note})
}

// deviceHeld is how many objects of kind the point's clients held on
// the device, and how many were there before them: the kernel's count
// above its baseline; else the server's own (sim; the AHs rxe does not
// count, twice over when the clients share its device).
func deviceHeld(p result.Point, kind string, shared bool) (held, base int) {
	if kind == "ah" {
		if p.Server.PeakAHs == 0 {
			return 0, 0
		}
		if shared {
			return 2 * p.Server.PeakAHs, 0
		}
		return p.Server.PeakAHs, 0
	}
	if p.Peak.RDMA != nil {
		return p.Peak.RDMA[kind], p.Peak.Baseline[kind]
	}
	return p.Server.Resources[kind], 0
}

func deviceCaps(d *result.DeviceInfo) map[string]int64 {
	c := d.Caps
	return map[string]int64{"max_qp": int64(c.MaxQP), "max_cq": int64(c.MaxCQ), "max_mr": int64(c.MaxMR), "max_ah": int64(c.MaxAH)}
}

func growth(from, to uint64) float64 {
	if to <= from {
		return 0
	}
	return float64(to - from)
}

// trim2 is x to two decimals, or two significant digits below 0.01
// (a CQ shared by thousands of clients is not 0 per client).
func trim2(x float64) string {
	if x > 0 && x < 0.01 {
		return fmt.Sprintf("%.2g", x)
	}
	s := fmt.Sprintf("%.2f", x)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// Line is the projection in one line for the end of a terminal run:
// the first walls, first first.
func (pr *Projection) Line() string {
	var ws []string
	for i, w := range pr.Walls {
		if i == 3 {
			break
		}
		ws = append(ws, fmt.Sprintf("%s at %s (%s, %s per client)", w.Limit, Thousands(w.Clients), w.Who, w.PerText()))
	}
	s := fmt.Sprintf("projected walls, from the costs at %s clients: %s", Thousands(pr.From), strings.Join(ws, "; "))
	if pr.Simulated {
		s = "(simulated) " + s
	}
	return s
}

// PerText is the per-client cost with its unit: "2 QPs", "9.4 KiB".
func (w ProjectedWall) PerText() string {
	if w.Unit == "bytes" {
		return bytesPer(w.PerClient)
	}
	if w.PerClient == 1 {
		return "1 " + strings.TrimSuffix(w.Unit, "s")
	}
	return trim2(w.PerClient) + " " + w.Unit
}

// BoundText is the bound with its unit.
func (w ProjectedWall) BoundText() string {
	if w.Unit == "bytes" {
		return bytesText(uint64(w.Bound))
	}
	return Thousands(int(w.Bound)) + " " + w.Unit
}

// bytesPer is a small byte count per client: "812 B", "9.4 KiB".
func bytesPer(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// Costs is the per-client costs in a sentence, for the report.
func (pr *Projection) Costs() string {
	var cs []string
	add := func(what string, v float64, text string) {
		if v > 0 {
			cs = append(cs, what+" "+text)
		}
	}
	add("server RSS", pr.ServerRSS, bytesPer(pr.ServerRSS))
	add("load generators' RSS", pr.GeneratorRSS, bytesPer(pr.GeneratorRSS))
	add("the kernel's slab, vmalloc, page tables and stacks", pr.Kernel, bytesPer(pr.Kernel))
	add("MemAvailable", pr.MemAvailable, bytesPer(pr.MemAvailable))
	add("server mappings", pr.ServerMaps, trim2(pr.ServerMaps))
	add("server fds", pr.ServerFDs, trim2(pr.ServerFDs))
	if pr.Procs > 0 {
		add("mappings of a load generator per client it holds", pr.GeneratorMaps, fmt.Sprintf("%s (%d generators)", trim2(pr.GeneratorMaps), pr.Procs))
		add("fds of a load generator per client it holds", pr.GeneratorFDs, trim2(pr.GeneratorFDs))
	}
	add("QPs on the device", pr.QPs, trim2(pr.QPs))
	s := fmt.Sprintf("Per client at %s clients: %s.", Thousands(pr.From), strings.Join(cs, ", "))
	if pr.Simulated {
		s += " Simulated: the sim's costs, not an RDMA device's."
	}
	return s
}

// remoteGenerators projects the walls of load generators on other hosts
// (--hosts, --vm-peer's second guest) from their own readings of
// themselves with every client held (result.GeneratorUsage): no reading
// before the clients, so a process's start-up counts per client too.
func (pr *Projection) remoteGenerators(p result.Point, n float64) {
	var us []result.GeneratorUsage
	for _, h := range p.Hosts {
		us = append(us, h.Usage...)
	}
	if len(us) == 0 {
		return
	}
	pr.Procs = len(us)
	per := n / float64(len(us))
	var maps, fds float64
	var mapLimit, fdLimit int64
	for _, u := range us {
		pr.GeneratorRSS += float64(u.RSS) / n
		maps, fds = math.Max(maps, float64(u.Maps)/per), math.Max(fds, float64(u.FDs)/per)
		if v, err := strconv.ParseInt(u.Limits["vm.max_map_count"], 10, 64); err == nil && (mapLimit == 0 || v < mapLimit) {
			mapLimit = v
		}
		if v, err := strconv.ParseInt(u.Limits["RLIMIT_NOFILE"], 10, 64); err == nil && (fdLimit == 0 || v < fdLimit) {
			fdLimit = v
		}
	}
	pr.GeneratorMaps, pr.GeneratorFDs = maps, fds
	who := fmt.Sprintf("each of %d load generators on their hosts", len(us))
	pr.add("vm.max_map_count", who, maps, mapLimit, 0, len(us), "mappings",
		fmt.Sprintf("vm.max_map_count of their hosts, per process; start-up mappings counted per client; N clients need --procs ≥ N × %s / %s", trim2(maps), Thousands(int(mapLimit))))
	pr.add("rlimit-nofile", who, fds, fdLimit, 0, len(us), "fds", "RLIMIT_NOFILE of their hosts, per process")
}
