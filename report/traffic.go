package report

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/slo"
)

// The data path with N held: each point's traffic phase in the columns
// a capacity report of an RDMA server is read by (clients, success,
// connect time, latency, throughput, server memory), measured rather
// than estimated.

// TrafficRow is one point's traffic phase (the first trial at a count).
type TrafficRow struct {
	Clients    int
	Success    string
	ConnectP50 string // ms
	// Window is the phase's window in seconds; Unmeasured the clients
	// that completed no message inside it ("–" in runs that did not
	// count them), and UnmeasuredNote says which and why, "" with none.
	Window, Unmeasured, UnmeasuredNote string
	// Extended says how far the window went past its minimum, "" when
	// it did not.
	Extended string
	// Latency percentiles of a message, formatted with their unit.
	P50, P90, P99, P999, Max string
	MsgRate, MBps            string
	// PerClient is the slowest, median and fastest client's msg/s.
	PerClient string
	ServerMem string // server RSS at full load
	ServerCPU string // cores during the phase
	GenCPU    string // the busiest generator's cores of its GOMAXPROCS
	// HostCPU is the server's machine's cores busy during the phase and,
	// in brackets, those in softirq ("1.92 (0.41 softirq)").
	HostCPU string
	Errors  string
	SLO     string // "✅ met", "❌ p99 5.1ms > 2ms"
	Harness string // why the figures are the generators' limit, if they are
}

// trafficRows formats every count's first traffic phase.
func trafficRows(run *result.Run) []TrafficRow {
	var rows []TrafficRow
	seen := map[int]bool{}
	pts := append([]result.Point(nil), run.Points...)
	// At a count with both, the fresh point's phase is the count's
	// (analysis.Pool); a staircase's step is marked.
	sort.SliceStable(pts, func(i, j int) bool {
		if pts[i].Clients != pts[j].Clients {
			return pts[i].Clients < pts[j].Clients
		}
		return !pts[i].Cumulative && pts[j].Cumulative
	})
	for _, p := range pts {
		t := p.Traffic
		if t == nil || seen[p.Clients] {
			continue
		}
		seen[p.Clients] = true
		r := TrafficRow{Clients: p.Clients, Success: Pct(p.SuccessRate), ConnectP50: f1(p.Connect.P50),
			P50: latency(t.Latency.P50), P90: latency(t.Latency.P90), P99: latency(t.Latency.P99),
			P999: latency(t.Latency.P999), Max: latency(t.Latency.Max),
			MsgRate: fmt.Sprintf("%.0f", t.MsgRate), MBps: f2(t.MBps),
			PerClient: ClientRate(t.PerClient.Min) + " / " + ClientRate(t.PerClient.Median) + " / " + ClientRate(t.PerClient.Max),
			ServerMem: "–", ServerCPU: "–", GenCPU: "–", HostCPU: "–", Errors: "–", SLO: "–", Harness: t.HarnessLimit,
			Window: fmt.Sprintf("%.1f", t.DurationSec), Unmeasured: "–"}
		if p.Cumulative {
			r.Success += " " + StepMark
		}
		if t.MinDurationSec > 0 {
			r.Unmeasured = fmt.Sprint(t.Unmeasured)
			if t.DurationSec > t.MinDurationSec+0.05 {
				r.Extended = fmt.Sprintf("the window extended from its minimum of %g s to %.1f s", t.MinDurationSec, t.DurationSec)
				if t.Unmeasured == 0 {
					r.Extended += ", until every client had completed a message in it"
				}
			}
		}
		if u := t.UnmeasuredText(); u != "" {
			r.UnmeasuredNote = fmt.Sprintf("%s inside the %.1f s window", u, t.DurationSec)
			if n := t.UnmeasuredNames(); n != "" {
				r.UnmeasuredNote += " (" + n + ")"
			}
			r.UnmeasuredNote += ": the window's rates and latencies describe only the others, so the point cannot pass its SLOs"
		}
		if p.Peak != nil && p.Peak.ServerRSS > 0 {
			r.ServerMem = bytesIEC(float64(p.Peak.ServerRSS))
		}
		if t.ServerCPU > 0 {
			r.ServerCPU = f2(t.ServerCPU) + cpuParts(t.ServerSys, t.ServerSpin)
		}
		if t.HostCPU > 0 {
			r.HostCPU = fmt.Sprintf("%s (%s softirq)", f2(t.HostCPU), f2(t.HostSoftirq))
		}
		if t.GeneratorCores > 0 {
			r.GenCPU = fmt.Sprintf("%s of %d", f2(t.GeneratorCPU), t.GeneratorCores) + cpuParts(t.GeneratorSys, t.GeneratorSpin)
		}
		if n := t.ErrorCount(); n > 0 {
			var parts []string
			for _, k := range t.ErrorClasses() {
				parts = append(parts, fmt.Sprintf("%s %d", k, t.Errors[k]))
			}
			r.Errors = strings.Join(parts, ", ")
		}
		switch {
		case t.Error != "":
			r.SLO = "❌ " + t.Error
		case len(t.SLO) > 0 && t.SLOPassed:
			r.SLO = "✅ met"
		case len(t.SLO) > 0:
			var missed []string
			for _, v := range t.SLO {
				if !v.Passed {
					missed = append(missed, v.Text)
				}
			}
			r.SLO = "❌ " + strings.Join(missed, ", ")
		}
		rows = append(rows, r)
	}
	return rows
}

// cpuParts names the parts of a process's cores worth knowing: in the
// kernel (where rxe does its work) and polling empty CQs.
func cpuParts(sys, spin float64) string {
	var parts []string
	if sys > 0 {
		parts = append(parts, f2(sys)+" in the kernel")
	}
	if spin > 0 {
		parts = append(parts, f2(spin)+" polling empty CQs")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// TrafficLine is a point's traffic phase in one line, as a probe prints it under
// the point's line; "" without one.
func TrafficLine(pt result.Point) string {
	t := pt.Traffic
	if t == nil {
		return ""
	}
	mode := fmt.Sprintf("depth %d", t.Depth)
	if t.RatePerClient > 0 {
		mode = fmt.Sprintf("%g msg/s per client", t.RatePerClient)
	}
	window := fmt.Sprintf("%.1f s", t.DurationSec)
	if t.MinDurationSec > 0 && t.DurationSec > t.MinDurationSec+0.05 {
		window += fmt.Sprintf(" (extended from %g s)", t.MinDurationSec)
	}
	window += fmt.Sprintf(", unmeasured %d", t.Unmeasured)
	if n := t.UnmeasuredNames(); n != "" {
		window += " (" + n + ")"
	}
	s := fmt.Sprintf("        traffic: %s %d B, %s, %s; %.0f msg/s, %.2f MB/s; latency p50 %s p99 %s max %s; per client %s..%s msg/s",
		t.Op, t.MsgBytes, mode, window, t.MsgRate, t.MBps,
		latency(t.Latency.P50), latency(t.Latency.P99), latency(t.Latency.Max), ClientRate(t.PerClient.Min), ClientRate(t.PerClient.Max))
	if r := pt.LatencyReference; r != nil && r.Error == "" && r.Figures["t_typical"] > 0 && t.Latency.P50 > 0 {
		s += fmt.Sprintf("; p50 %.2f × %s's t_typical %s, read just before", t.Latency.P50/r.Figures["t_typical"], r.Tool, latency(r.Figures["t_typical"]))
	}
	if n := t.ErrorCount(); n > 0 {
		var parts []string
		for _, k := range t.ErrorClasses() {
			parts = append(parts, fmt.Sprintf("%s %d", k, t.Errors[k]))
		}
		s += "; errors: " + strings.Join(parts, ", ")
	}
	var failed []string
	for _, v := range t.SLO {
		if !v.Passed {
			failed = append(failed, v.Text)
		}
	}
	switch {
	case len(failed) > 0:
		s += "; SLO missed: " + strings.Join(failed, ", ")
	case len(t.SLO) > 0 && t.Error == "":
		s += "; SLO met"
	}
	if t.HarnessLimit != "" {
		s += "; harness limit: " + t.HarnessLimit
	}
	if t.Error != "" {
		s += "; phase error: " + t.Error
	}
	return s
}

// latency formats microseconds with their unit.
func latency(us float64) string {
	if us <= 0 {
		return "–"
	}
	return slo.FormatLatency(time.Duration(us * 1e3))
}

// trafficNote says how the phases were run, "" without any.
func trafficNote(run *result.Run) string {
	t := run.Config.Traffic
	if t == nil {
		return ""
	}
	loop := fmt.Sprintf("closed loop, %d outstanding per client", t.Depth)
	if t.RatePerClient > 0 {
		loop = fmt.Sprintf("open loop at %g messages/s per client (at most %d outstanding; latency from when each was due)", t.RatePerClient, t.Depth)
	}
	window, extended := fmt.Sprintf("for %gs", t.DurationSec), ""
	if t.MaxDurationSec > t.DurationSec {
		window = fmt.Sprintf("for at least %gs", t.DurationSec)
		extended = fmt.Sprintf(" The window extended past that until every client had completed a message inside it, up to %gs; a client without one is unmeasured.", t.MaxDurationSec)
	}
	s := fmt.Sprintf("Once every client of a point connected, each exchanged verified %s messages of %d B with the server %s (%s; a message outstanding %gs fails its client).%s",
		t.Op, run.Config.PayloadBytes, window, loop, t.MsgTimeoutSec, extended)
	if t.BusyPollUS > 0 {
		s += fmt.Sprintf(" Server and clients busy-polled their completion queues for up to %gus after each completion (--busy-poll) before sleeping on the completion channel:"+
			" a polling process uses its CPU whether it has work or not, so the CPU columns include the polling, and say how much of it went to polling empty CQs where the process counted it (rdmaprobe's own server and generators).", t.BusyPollUS)
	}
	if run.Config.SLO != "" {
		s += fmt.Sprintf(" Objectives: %s.", run.Config.SLO)
	}
	return s
}

// trafficSentences are the answer's lines about the data path: max
// connected and max sustainable among the counts tested, and the
// harness's limit where it was reached.
func trafficSentences(run *result.Run, sim string) []string {
	if run.Config.Traffic == nil {
		return nil
	}
	var out []string
	v := analysis.Conclude(run).Designs[0]
	conn, sus := v.MaxConnected, max(v.MaxSustainable, 0)
	slos := run.Config.SLO
	if slos == "" {
		slos = "no objectives"
	}
	s := fmt.Sprintf("%sMax connected: **%d**; max sustainable (%s): **%d**, among the counts tested", sim, conn, slos, sus)
	if run.Config.Criterion == result.CriterionTraffic {
		s += " (the search followed the SLOs)"
	}
	out = append(out, s+".")
	var peak *result.Point
	for i := range run.Points {
		p := &run.Points[i]
		if p.Traffic != nil && (peak == nil || p.Traffic.MsgRate > peak.Traffic.MsgRate) {
			peak = p
		}
	}
	if peak != nil {
		t := peak.Traffic
		out = append(out, fmt.Sprintf("%sPeak message rate %.0f msg/s (%s MB/s) at %d clients, latency p50 %s, p99 %s.",
			sim, t.MsgRate, f2(t.MBps), peak.Clients, latency(t.Latency.P50), latency(t.Latency.P99)))
	}
	for _, p := range run.Points {
		if p.Traffic != nil && p.Traffic.HarnessLimit != "" {
			out = append(out, fmt.Sprintf("⚠️ At %d clients the load generators were the limit (%s): the figures there are the harness's, not the server's.",
				p.Clients, p.Traffic.HarnessLimit))
			break
		}
	}
	return out
}

// trafficSeries are a run's traffic phases against clients, the first
// trial at each count.
type trafficSeries struct {
	rate, mbps, p50, p90, p99, p999, lo, med, hi Series
}

// trafficData collects them; false when the run had no traffic phase.
func trafficData(run *result.Run) (trafficSeries, bool) {
	d := trafficSeries{rate: Series{Label: "msg/s"}, mbps: Series{Label: "MB/s ×1000"},
		p50: Series{Label: "p50"}, p90: Series{Label: "p90"}, p99: Series{Label: "p99"}, p999: Series{Label: "p99.9"},
		lo: Series{Label: "slowest client"}, med: Series{Label: "median client"}, hi: Series{Label: "fastest client"}}
	if run.Config.Traffic == nil {
		return d, false
	}
	seen := map[int]bool{}
	pts := append([]result.Point(nil), run.Points...)
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Clients < pts[j].Clients })
	for _, p := range pts {
		t := p.Traffic
		if t == nil || seen[p.Clients] || t.Messages == 0 {
			continue
		}
		seen[p.Clients] = true
		x := float64(p.Clients)
		add := func(s *Series, y float64) { s.X, s.Y = append(s.X, x), append(s.Y, y) }
		add(&d.rate, t.MsgRate)
		add(&d.mbps, t.MBps*1000)
		add(&d.p50, t.Latency.P50)
		add(&d.p90, t.Latency.P90)
		add(&d.p99, t.Latency.P99)
		add(&d.p999, t.Latency.P999)
		add(&d.lo, t.PerClient.Min)
		add(&d.med, t.PerClient.Median)
		add(&d.hi, t.PerClient.Max)
	}
	return d, true
}

// trafficFigures plots the phases against clients: throughput, latency
// percentiles, and the spread between clients (fairness). None when the
// run had no traffic phase.
func trafficFigures(run *result.Run) []Plot {
	d, ok := trafficData(run)
	if !ok {
		return nil
	}
	rate := []Series{d.rate, d.mbps}
	if v := analysis.Conclude(run); len(v.Designs) == 1 && v.Designs[0].Bend != nil {
		rate = append(rate, bendMark(*v.Designs[0].Bend))
	}
	return []Plot{
		linePlot("throughput", "Message rate vs clients (all clients)", "clients", "per second", rate),
		logLinePlot("latency", "Message latency percentiles vs clients", "clients", "µs (log)", []Series{d.p50, d.p90, d.p99, d.p999}),
		linePlot("fairness", "Per-client message rate vs clients", "clients", "msg/s per client", []Series{d.lo, d.med, d.hi}),
	}
}

// bendMark marks the performant-client count on a rate plot: a vertical
// line at it, up to the peak rate.
func bendMark(b result.Bend) Series {
	x := float64(b.Performant)
	return Series{Label: fmt.Sprintf("performant: %d", b.Performant), X: []float64{x, x}, Y: []float64{0, b.Peak}}
}

// referenceWhere names where a reference ran (Reference.Where). A run
// before schema version 4 did not say: its references ran in one guest,
// which is where its traffic ran unless its generators were on other
// hosts (--vm-peer).
func referenceWhere(run *result.Run, r result.Reference) string {
	switch {
	case r.Where != "":
		return r.Where
	case len(run.Hosts) > 0 && run.Backend.Name == "vm":
		return "in one guest, not across the link the traffic crossed"
	}
	return ""
}

// unlikeRatio says why the run's traffic and reference r ran on unlike
// paths, "" when they ran on the same one: an old --vm-peer run's traffic
// crossed to the other guest while its reference stayed in one
// (referenceWhere), and a run over several generator hosts has its
// traffic summed over all their paths while each reference times one.
func unlikeRatio(run *result.Run, r result.Reference) string {
	switch {
	case r.Where == "" && len(run.Hosts) > 0 && run.Backend.Name == "vm":
		return "rdmaprobe's traffic crossed to the other guest"
	case strings.HasPrefix(r.Where, "server host ") && len(run.Hosts) > 1:
		return fmt.Sprintf("rdmaprobe's traffic is the sum over %d generator hosts, perftest's one host's path", len(run.Hosts))
	}
	return ""
}

// trafficReference sets the run's figures beside perftest's where the
// traffic ran at the same message size: the smallest count's latency p50
// against ib_send_lat's t_typical, and the peak message rate against
// ib_send_bw's (ib_write_* and ib_read_* for those operations); with
// each tool's figure from before the points and from after them when it
// ran twice (the host's speed drifts). Each names where it ran; no ratio
// is given to a reference taken elsewhere than the traffic (an old
// --vm-peer run's). "" without a reference.
func trafficReference(run *result.Run) string {
	refs := run.Environment.DataPath
	if len(refs) == 0 {
		return ""
	}
	var small, peak *result.Point
	for i := range run.Points {
		p := &run.Points[i]
		t := p.Traffic
		if t == nil || t.Messages == 0 {
			continue
		}
		if small == nil || p.Clients < small.Clients {
			small = p
		}
		if peak == nil || t.MsgRate > peak.Traffic.MsgRate {
			peak = p
		}
	}
	// Each tool's runs, in the order they ran.
	var tools []string
	// Each tool's runs in one place, in the order they ran: one per
	// generator host with --hosts.
	byTool := map[string][]result.Reference{}
	for _, r := range refs {
		key := r.Tool + "\x00" + r.Where
		if _, ok := byTool[key]; !ok {
			tools = append(tools, key)
		}
		byTool[key] = append(byTool[key], r)
	}
	var parts []string
	for _, key := range tools {
		tool, _, _ := strings.Cut(key, "\x00")
		var ok []result.Reference
		for _, r := range byTool[key] {
			if r.Absent {
				parts = append(parts, r.Error)
			} else if r.Error != "" {
				parts = append(parts, fmt.Sprintf("%s%s failed%s: %s", r.Tool, whereSuffix(run, r), whenSuffix(r, len(byTool[key])), r.Error))
			} else {
				ok = append(ok, r)
			}
		}
		if len(ok) == 0 {
			continue
		}
		// figure lists key's value for each run ("29.3 µs before the
		// points and 30.1 µs after") and, with ratio, ours to each.
		figure := func(key string, format func(float64) string, ours float64, ratio func(float64) string) (vals, ratios string) {
			var vs, rs []string
			for _, r := range ok {
				v := r.Figures[key]
				vs = append(vs, format(v)+whenSuffix(r, len(ok)))
				if ratio != nil && v > 0 {
					rs = append(rs, ratio(ours/v))
				}
			}
			return strings.Join(vs, " and "), strings.Join(rs, " and ")
		}
		cmd, unlike := ok[0].Command, unlikeRatio(run, ok[0])
		at := ""
		if w := referenceWhere(run, ok[0]); w != "" {
			at = " " + w
		}
		noRatio := " (no ratio: " + unlike + ")"
		if _, lat := ok[0].Figures["t_typical"]; lat {
			var ours float64
			if small != nil {
				ours = small.Traffic.Latency.P50
			}
			vals, ratios := figure("t_typical", latency, ours, func(x float64) string { return fmt.Sprintf("%.2f×", x) })
			p99, _ := figure("99%", latency, 0, nil)
			s := fmt.Sprintf("`%s`%s: t_typical %s, p99 %s", cmd, at, vals, p99)
			switch {
			case unlike != "":
				s += noRatio
			case small != nil && small.Clients == 1:
				// What t_typical times (perftest halves a ping-pong's
				// round trip, not a READ) against rdmaprobe's latency.
				par := "t_typical is half perftest's round trip, so 2× matches it"
				switch tool {
				case "ib_write_lat":
					par = "t_typical is a WRITE's one way; rdmaprobe's latency waits for its acknowledgement too"
				case "ib_read_lat":
					par = "t_typical is a whole READ, so 1× matches it"
				}
				s += fmt.Sprintf(" (rdmaprobe at 1 client: p50 %s, %s; %s)", latency(ours), ratios, par)
			case small != nil:
				// ib_send_lat is one QP's ping-pong: a ratio to a point of
				// many clients would measure the queueing, not the harness.
				s += fmt.Sprintf(" (rdmaprobe at %d clients: p50 %s; only a 1-client point compares with it)",
					small.Clients, latency(ours))
			}
			parts = append(parts, s)
		}
		if v, rate := ok[0].Figures["msg/s"]; rate && v > 0 {
			var ours float64
			if peak != nil {
				ours = peak.Traffic.MsgRate
			}
			vals, pcts := figure("msg/s", func(v float64) string { return fmt.Sprintf("%.0f msg/s", v) }, ours, Pct)
			mbs, _ := figure("BW average", func(v float64) string { return f2(v) + " MB/s" }, 0, nil)
			s := fmt.Sprintf("`%s`%s: %s, %s", cmd, at, vals, mbs)
			if unlike != "" {
				s += noRatio
			} else if peak != nil {
				clients := "clients"
				if peak.Clients == 1 {
					clients = "client"
				}
				s += fmt.Sprintf(" (rdmaprobe's peak: %.0f msg/s at %d %s, %s)", ours, peak.Clients, clients, pcts)
			}
			parts = append(parts, s)
		}
	}
	head := "perftest on the same device: "
	if referenceWhere(run, refs[0]) != "" {
		head = "perftest at the traffic's message size: "
	}
	s := head + strings.Join(parts, "; ") + "."
	if turns := turnsReference(run); turns != "" {
		s += " " + turns
	}
	return s
}

// turnsReference sets each 1-client point's latency p50 against the
// reading of perftest's latency tool taken just before it
// (Point.LatencyReference), with the median ratio over several: figures
// taken in turns, which a drifting host moves together. "" without such
// points.
func turnsReference(run *result.Run) string {
	var parts []string
	var ratios []float64
	tool := ""
	for _, p := range run.Points {
		r, t := p.LatencyReference, p.Traffic
		if r == nil || t == nil || t.Messages == 0 || p.Clients != 1 {
			continue
		}
		tool = r.Tool
		v := r.Figures["t_typical"]
		if r.Error != "" || v <= 0 {
			parts = append(parts, fmt.Sprintf("p50 %s without its reading (%s failed)", latency(t.Latency.P50), r.Tool))
			continue
		}
		x := t.Latency.P50 / v
		ratios = append(ratios, x)
		parts = append(parts, fmt.Sprintf("p50 %s against t_typical %s (%.2f×)", latency(t.Latency.P50), latency(v), x))
	}
	if len(parts) == 0 {
		return ""
	}
	s := fmt.Sprintf("In turns, each 1-client point against %s run just before it: %s", tool, strings.Join(parts, "; "))
	if len(ratios) > 1 {
		s += fmt.Sprintf("; median %.2f×", analysis.Percentiles(ratios).P50)
	}
	return s + "."
}

// whereSuffix is " <where>" for a reference that says where it ran.
func whereSuffix(run *result.Run, r result.Reference) string {
	if w := referenceWhere(run, r); w != "" {
		return " " + w
	}
	return ""
}

// whenSuffix says when a reference ran, if its tool ran more than once.
func whenSuffix(r result.Reference, runs int) string {
	if runs < 2 {
		return ""
	}
	if r.When == result.ReferenceAfter {
		return " after the points"
	}
	return " before the points"
}
