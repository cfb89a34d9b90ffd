package report

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Model is everything a report shows, formatted from the run and what
// package analysis finds in it.
type Model struct {
	Title     string
	Simulated bool
	Backend   string
	Answer    Answer
	Env       [][2]string
	Caps      [][2]string
	Reference string
	Rows      []Row
	// Interrupted is the point the run was measuring when it stopped
	// (result.Run.Interrupted): a row of its own, in no count.
	Interrupted *result.Point
	// Rates is the connection rate of each trial and, per client count
	// with several trials, pooled.
	Rates []RateRow
	// RateNote says how the rate table was measured.
	RateNote string
	Costs    []CostRow
	// Walls are the walls projected from the per-client costs
	// (analysis.ProjectWalls), WallCosts those costs in a sentence;
	// absent when no point held its clients with samples.
	Walls     []WallRow
	WallCosts string
	// PhaseAt is the client count whose connection phases are shown.
	PhaseAt int
	Phases  []PhaseRow
	// PhaseHead and PhaseByPoint are each point's phases, p50 (p99) in
	// ms, when more than one point has any: how a step slows with N.
	PhaseHead    []string
	PhaseByPoint [][]string
	RTT          []RTTRow
	// Traffic is each count's traffic phase (none: the run had none);
	// TrafficNote says how they ran.
	Traffic     []TrafficRow
	TrafficNote string
	// TrafficRef sets the figures beside perftest's on the same device.
	TrafficRef string
	Limit      *result.Diagnosis
	// LimitAt is the client count the diagnosis is for.
	LimitAt int
	Recs    []string
	Method  Method
	// Target names a server or clients that are commands of the
	// operator's, and the figures they cannot give (absent otherwise).
	Target []string
	// Hosts are the load-generator hosts when they were other machines,
	// HostPoints each point's share of them (absent otherwise).
	Hosts      []HostRow
	HostPoints []HostPointRow
	HostsNote  string
	Plots      []Plot
	Notes      []string // sampler errors and other caveats
	// Counters say which of the device's own counters rose at each point;
	// CounterNote where they were read (absent: none were).
	Counters    []string
	CounterNote string

	// Designs is the capacity-by-design table of a run of several
	// server designs, and Sections each design's own report; the
	// per-count sections above are then empty, as they are each
	// design's.
	Designs  []DesignRow
	Sections []*Model
	// Design is the design a section reports on; Stem its files' name
	// ("report-srq"), PlotPrefix its plots' ("srq-").
	Design, Stem, PlotPrefix string
}

// Answer is the executive summary: analysis.Findings' capacities, with
// the rows they name.
type Answer struct {
	// Full is the highest count at which every client connected (0 if
	// none), FullRow its row.
	Full       int
	FullRow    *Row
	Practical  int // highest count of the run's ≥95% prefix
	Highest95  int // highest count at ≥95%, monotonic or not
	FirstFail  int // smallest count below 100%
	FirstFailR *Row
	// NonMonotonic lists counts whose success rate is below that of a
	// larger count (success rose with load).
	NonMonotonic []int
	AboveHi      bool
	Sentences    []string
}

// Row is one client count of the success-rate table.
type Row struct {
	analysis.Count
	Status   string
	QPs, CQs string
	MRs      string
	Source   string // where the resource counts came from
}

// CostRow is the per-client cost at one count.
type CostRow struct {
	Clients                      int
	QPs, CQs, MRs, PDs           string
	RegisteredBytes, ServerBytes string
	// Maps is the server's memory mappings per connected client (peak
	// minus the first sample of the point), what vm.max_map_count bounds;
	// "–" without process samples.
	Maps string
}

// WallRow is one projected wall.
type WallRow struct {
	Limit, Who, PerClient, Bound, Clients, Note string
}

// PhaseRow is one connection phase's percentiles in milliseconds.
type PhaseRow struct {
	Phase         string
	N             int
	P50, P95, P99 string
}

// RTTRow is the message round trip at one count, in microseconds.
type RTTRow struct {
	Clients            int
	N                  int
	P50, P95, P99, Max string
}

// Method says how the numbers were obtained.
type Method struct {
	Command   string
	Mode      string
	Threshold string
	Trials    int
	Timeout   string
	Rounds    int
	Payload   int
	Procs     int
	InFlight  int
	// TLS says how clients authenticated: key exchange, resumption.
	TLS string
	// CPU says how server and generators shared the CPUs (GOMAXPROCS).
	CPU      string
	Rate     string
	Resource string
	Steps    []result.Step
	Started  string
	Duration string
	Complete bool
	Error    string
	PSN      string
	// Counters say which of the device's own counters rose at each point;
	// CounterNote where they were read (absent: none were).
	Counters    []string
	CounterNote string
}

// NewModel formats the report model of run from analysis.Analyse.
func NewModel(run *result.Run) *Model {
	m := &Model{Simulated: run.Backend.Simulated, Backend: run.Backend.Description}
	if m.Backend == "" {
		m.Backend = run.Backend.Name
	}
	m.Title = "rdmaprobe: RDMA client capacity on " + m.Backend
	m.Counters, m.CounterNote = counterLines(run)
	if m.Simulated && !strings.Contains(strings.ToLower(m.Backend), "simulated") {
		m.Title += " (simulated)"
	}
	if run.DesignModes() != nil {
		m.Title = "rdmaprobe: RDMA client capacity by server design on " + m.Backend
		if m.Simulated && !strings.Contains(strings.ToLower(m.Backend), "simulated") {
			m.Title += " (simulated)"
		}
		m.Sections, m.Designs = designSections(run), DesignRows(run)
		m.designAnswer(run)
		m.env(run)
		m.method(run)
		m.target(run)
		m.hosts(run)
		return m
	}
	f := analysis.Analyse(run)
	for _, c := range f.Counts {
		r := Row{Count: c, Status: Status(c, f.Threshold)}
		r.QPs, r.CQs, r.MRs, r.Source = resources(run.Points, c.Clients)
		m.Rows = append(m.Rows, r)
	}
	m.Interrupted = run.Interrupted
	m.answer(run, f)
	m.Traffic, m.TrafficNote, m.TrafficRef = trafficRows(run), trafficNote(run), trafficReference(run)
	m.rates(run)
	m.env(run)
	m.costs(f)
	m.walls(run)
	m.phases(run)
	m.Limit, m.LimitAt, m.Recs = f.Limit, f.LimitAt, f.Recommendations
	m.method(run)
	m.target(run)
	m.hosts(run)
	switch {
	case run.Config.ClientKind == result.ClientRDMACM && run.Config.Traffic == nil:
		m.Notes = append(m.Notes, "the clients were rdma_cm connections (--client-kind rdmacm): no traffic phase ran, since a server that posts no receives (cmtime's) would answer every SEND with an RNR NAK (--cm-server-echoes says a server echoes); the figures are the connections held and the time of each rdma_cm step (resolve_addr, resolve_route, qp_create, establish)")
	case run.Config.ClientKind == result.ClientRDMACM:
		m.Notes = append(m.Notes, "the clients were rdma_cm connections (--client-kind rdmacm) to a server that echoes (--cm-server-echoes): the traffic phase sent SENDs over them as over built-in clients, each counted once its echo came back verified")
	}
	for _, p := range run.Points {
		for _, e := range p.SamplerErrors {
			m.Notes = append(m.Notes, fmt.Sprintf("%d clients, trial %d: collector failed: %s", p.Clients, p.Trial, e))
		}
	}
	return m
}

func (m *Model) answer(run *result.Run, f analysis.Findings) {
	a := &m.Answer
	a.Full, a.FirstFail, a.Practical, a.Highest95, a.NonMonotonic = f.Full, f.FirstShort, f.Practical, f.Highest95, f.NonMonotonic
	for i := range m.Rows {
		switch r := &m.Rows[i]; r.Clients {
		case f.Full:
			a.FullRow = r
		case f.FirstShort:
			a.FirstFailR = r
		}
	}
	if run.Search != nil {
		a.AboveHi = run.Search.AboveHi
	}
	sim := ""
	if m.Simulated {
		sim = "(simulated) "
	}
	// The run's threshold decides, as it did in the search and the table.
	thr := Pct(f.Threshold)
	v := analysis.Conclude(run).Designs[0]
	var capRow, failRow *Row
	for i := range m.Rows {
		switch r := &m.Rows[i]; r.Clients {
		case v.Capacity:
			capRow = r
		case v.FirstFail:
			failRow = r
		}
	}
	switch {
	case capRow != nil:
		a.Sentences = append(a.Sentences, fmt.Sprintf("%s**%d clients** pass at the %s threshold: %s connected (%d/%d; 95%% CI %s–%s), and every smaller count tested passed.",
			sim, capRow.Clients, thr, Pct(capRow.Rate), capRow.Connected, capRow.Attempted, Pct(capRow.CILow), Pct(capRow.CIHigh)))
	case len(m.Rows) > 0:
		a.Sentences = append(a.Sentences, fmt.Sprintf("%sThe smallest count tested failed at the %s threshold.", sim, thr))
	default:
		a.Sentences = append(a.Sentences, "The run holds no completed point.")
	}
	if r := failRow; r != nil {
		why := "below the " + thr + " threshold"
		if r.SLOFailed && !r.Errored && analysis.Passes(r.Connected, r.Attempted, f.Threshold) {
			why = "its traffic phase missed the SLOs"
		} else if r.Errored {
			why = "the point itself failed"
		}
		a.Sentences = append(a.Sentences, fmt.Sprintf("Failures begin at **%d clients**: %s (%d/%d; 95%% CI %s–%s), %s.",
			r.Clients, Pct(r.Rate), r.Connected, r.Attempted, Pct(r.CILow), Pct(r.CIHigh), why))
	} else if len(m.Rows) > 0 {
		last := m.Rows[len(m.Rows)-1].Clients
		a.Sentences = append(a.Sentences, fmt.Sprintf("No failures up to %d clients, the highest tested: capacity > %d.", last, last))
	}
	if a.Highest95 > 0 && a.Highest95 != a.Full {
		s := fmt.Sprintf("The highest count at ≥95%% connected (the practical rule's threshold) is %d", a.Highest95)
		switch {
		case a.Practical == a.Highest95:
		case f.Wall > 0 && f.Wall <= a.Highest95 && a.Practical < f.Wall:
			by := "a hard limit"
			if f.WallLimit != "" {
				by = f.WallLimit
			}
			s += fmt.Sprintf(", but %s refused clients from %d, so the practical rule stops at %d", by, f.Wall, a.Practical)
		default:
			s += fmt.Sprintf(", but smaller counts fell below 95%%, so only %d is reliably ≥95%%", a.Practical)
		}
		a.Sentences = append(a.Sentences, s+".")
	}
	if p := run.Interrupted; p != nil {
		a.Sentences = append(a.Sentences, "⏸ "+analysis.CutShort(*p))
	}
	a.Sentences = append(a.Sentences, trafficSentences(run, sim)...)
	for _, l := range VerdictLines(analysis.Conclude(run)) {
		a.Sentences = append(a.Sentences, sim+l)
	}
	if len(a.NonMonotonic) > 0 {
		a.Sentences = append(a.Sentences, fmt.Sprintf("⚠️ Non-monotonic: success at %s clients is lower than at a larger count. Success should not rise with load; these points were disturbed by something other than capacity (timeouts, noise) and deserve re-testing.",
			joinInts(a.NonMonotonic)))
	}
}

func (m *Model) env(run *result.Run) {
	e := run.Environment
	add := func(k, v string) {
		if v != "" {
			m.Env = append(m.Env, [2]string{k, v})
		}
	}
	add("Backend", m.Backend)
	if run.Backend.Reason != "" {
		add("Backend chosen because", run.Backend.Reason)
	}
	add("Host", e.Hostname)
	add("OS", e.OS)
	add("Kernel", e.Kernel)
	if e.CPUs > 0 {
		add("CPUs", fmt.Sprint(e.CPUs))
	}
	if e.MemoryBytes > 0 {
		add("Memory", bytesIEC(float64(e.MemoryBytes)))
	}
	if g := e.Guest; g != nil {
		add("Guest kernel", g.Kernel)
		if g.CPUs > 0 {
			add("Guest CPUs", fmt.Sprint(g.CPUs))
		}
		if g.MemoryBytes > 0 {
			add("Guest memory", bytesIEC(float64(g.MemoryBytes)))
		}
	}
	add("Go", e.GoVersion)
	if d := e.Device; d != nil {
		add("Device", fmt.Sprintf("%s port %d (%s, %s), GID[%d] %s, MTU %v", d.Name, d.Port.Port, d.Port.State,
			d.Port.LinkLayer, d.Port.GIDIndex, d.Port.GID.String(), d.Port.ActiveMTU.Bytes()))
		c := d.Caps
		for _, kv := range [][2]any{{"max_qp", c.MaxQP}, {"max_cq", c.MaxCQ}, {"max_mr", c.MaxMR}, {"max_pd", c.MaxPD},
			{"max_srq", c.MaxSRQ}, {"max_qp_wr", c.MaxQPWR}, {"max_cqe", c.MaxCQE}} {
			m.Caps = append(m.Caps, [2]string{kv[0].(string), fmt.Sprint(kv[1])})
		}
	}
	if l := run.Limits; l != nil {
		add("Limits", fmt.Sprintf("RLIMIT_NOFILE %s, RLIMIT_MEMLOCK %s, vm.max_map_count %d, somaxconn %d, threads-max %d, pid_max %d",
			limit(l.NoFile), limit(l.MemlockBytes), l.MaxMapCount, l.Somaxconn, l.ThreadsMax, l.PidMax))
	}
	if r := e.Reference; r != nil {
		if r.Error != "" {
			m.Reference = fmt.Sprintf("%s failed: %s", r.Tool, r.Error)
		} else {
			var fs []string
			for _, k := range sortedKeys(r.Figures) {
				fs = append(fs, fmt.Sprintf("%s %g", k, r.Figures[k]))
			}
			m.Reference = fmt.Sprintf("%s: %s (`%s`)", r.Tool, strings.Join(fs, ", "), r.Command)
		}
		if w := referenceWhere(run, *r); w != "" {
			m.Reference += ", " + w
		}
	}
}

func (m *Model) costs(f analysis.Findings) {
	for _, c := range f.Costs {
		maps := "–"
		if c.HasMaps {
			maps = f2(c.Maps)
		}
		m.Costs = append(m.Costs, CostRow{Clients: c.Clients, QPs: f2(c.QPs), CQs: f2(c.CQs), MRs: f2(c.MRs), PDs: f2(c.PDs),
			RegisteredBytes: bytesIEC(c.RegisteredMem), ServerBytes: bytesIEC(c.ServerRSS), Maps: maps})
	}
}

// walls fills Walls and WallCosts from analysis.ProjectWalls.
func (m *Model) walls(run *result.Run) {
	pr := analysis.ProjectWalls(run)
	if pr == nil {
		return
	}
	for _, w := range pr.Walls {
		m.Walls = append(m.Walls, WallRow{Limit: w.Limit, Who: w.Who, PerClient: w.PerText(), Bound: w.BoundText(),
			Clients: analysis.Thousands(w.Clients), Note: w.Note})
	}
	m.WallCosts = pr.Costs()
}

// phasesByPoint fills PhaseHead and PhaseByPoint: a column per phase
// that any point timed, a row per point in run order.
func (m *Model) phasesByPoint(run *result.Run) {
	var cols []string
	for _, ph := range result.Phases {
		for _, p := range run.Points {
			if pc, ok := p.Phases[ph]; ok && pc.N > 0 {
				cols = append(cols, ph)
				break
			}
		}
	}
	pts := slices.Clone(run.Points)
	slices.SortStableFunc(pts, func(a, b result.Point) int {
		return cmp.Or(strings.Compare(a.Design, b.Design), cmp.Compare(a.Clients, b.Clients), cmp.Compare(a.Trial, b.Trial))
	})
	var rows [][]string
	for _, p := range pts {
		if len(p.Phases) == 0 {
			continue
		}
		row := []string{itoa(p.Clients)}
		if p.Trial > 1 {
			row[0] += " #" + itoa(p.Trial)
		}
		if len(m.Designs) > 1 {
			row[0] = p.Design + " " + row[0]
		}
		for _, ph := range cols {
			cell := "–"
			if pc, ok := p.Phases[ph]; ok && pc.N > 0 {
				cell = f2(pc.P50) + " (" + f2(pc.P99) + ")"
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	if len(rows) < 2 || len(cols) == 0 {
		return
	}
	m.PhaseHead = append([]string{"Clients"}, cols...)
	m.PhaseByPoint = rows
}

func (m *Model) phases(run *result.Run) {
	// The phases at the highest fully connected count, else the largest.
	var pick *result.Point
	for i := range run.Points {
		p := &run.Points[i]
		if p.Clients == m.Answer.Full || (m.Answer.Full == 0 && (pick == nil || p.Clients > pick.Clients)) {
			pick = p
		}
	}
	if pick != nil {
		m.PhaseAt = pick.Clients
		for _, ph := range result.Phases {
			if pc, ok := pick.Phases[ph]; ok && pc.N > 0 {
				m.Phases = append(m.Phases, PhaseRow{Phase: ph, N: pc.N, P50: f2(pc.P50), P95: f2(pc.P95), P99: f2(pc.P99)})
			}
		}
		if pick.Connect.N > 0 {
			m.Phases = append(m.Phases, PhaseRow{Phase: "total connect", N: pick.Connect.N, P50: f2(pick.Connect.P50),
				P95: f2(pick.Connect.P95), P99: f2(pick.Connect.P99)})
		}
	}
	m.phasesByPoint(run)
	seen := map[int]bool{}
	for _, p := range run.Points {
		if p.RTT.N == 0 || seen[p.Clients] {
			continue
		}
		seen[p.Clients] = true
		m.RTT = append(m.RTT, RTTRow{Clients: p.Clients, N: p.RTT.N, P50: f1(p.RTT.P50), P95: f1(p.RTT.P95), P99: f1(p.RTT.P99), Max: f1(p.RTT.Max)})
	}
	sort.Slice(m.RTT, func(i, j int) bool { return m.RTT[i].Clients < m.RTT[j].Clients })
}

func (m *Model) method(run *result.Run) {
	c := run.Config
	mt := Method{Command: strings.Join(run.Command, " "), Mode: run.Mode, Threshold: Pct(c.Threshold), Trials: c.Trials,
		Timeout: fmt.Sprintf("%gs", c.ClientTimeout), Rounds: c.Rounds, Payload: c.PayloadBytes, Procs: c.Procs,
		InFlight: c.InFlight, Resource: c.ResourceMode, Complete: run.Complete, Error: run.Error}
	if c.TLSKex != "" {
		mt.TLS = "mutual TLS 1.3, key exchange " + c.TLSKex
		if c.TLSResume {
			mt.TLS += ", sessions resumed within each load generator"
		}
	} else if c.TLSResume {
		mt.TLS = "sessions resumed within each load generator"
	}
	if c.Mux > 0 {
		mt.Resource += fmt.Sprintf(", %d logical clients per QP, each admitted, echoed and counted on its own; "+
			"the logical clients of one QP share its fate (a bad message or a broken QP ends them all: shared-fate)", c.Mux)
		best := result.Point{}
		for _, p := range run.Points {
			if p.Connected > best.Connected {
				best = p
			}
		}
		if best.QPs > 0 {
			mt.Resource += fmt.Sprintf("; at most %d logical clients connected, on %d QPs", best.Connected, best.QPs)
		}
	}
	if c.Detach {
		mt.Resource += ", control connection closed once a client is accepted (clients leave with a goodbye over their QP)"
	}
	switch c.GoMaxProcs {
	case "split":
		mt.CPU = "Go runtimes split the CPUs (server half, load generators the rest)"
	case "all":
		mt.CPU = "each Go runtime sized to every CPU"
	}
	if c.Rate > 0 {
		mt.Rate = fmt.Sprintf("%g/s", c.Rate)
	} else {
		mt.Rate = "all at once"
	}
	if run.Search != nil {
		mt.Steps = run.Search.Steps
	}
	if !run.StartedAt.IsZero() {
		mt.Started = run.StartedAt.UTC().Format(time.RFC3339)
		if !run.FinishedAt.IsZero() {
			mt.Duration = run.FinishedAt.Sub(run.StartedAt).Round(time.Second).String()
		}
	}
	if run.PSN.Connections > 0 {
		mt.PSN = fmt.Sprintf("%d connections, %d distinct (client, server) PSN pairs", run.PSN.Connections, run.PSN.DistinctPairs)
		if !run.PSN.Unique {
			mt.PSN += fmt.Sprintf(", %d REPEATED", run.PSN.DuplicatePairs)
		}
	}
	m.Method = mt
}

// resources gives the server-side QP/CQ/MR counts at a client count (the
// highest over its trials) and where they came from.
func resources(points []result.Point, clients int) (qp, cq, mr, src string) {
	best := map[string]int{}
	for _, p := range points {
		if p.Clients != clients {
			continue
		}
		var m map[string]int
		switch {
		case p.Peak != nil && p.Peak.ByRole["server"] != nil:
			m, src = p.Peak.ByRole["server"], "server process, kernel count"
		case p.Server.Resources != nil:
			m, src = p.Server.Resources, "server's fabric"
		case p.Peak != nil && p.Peak.RDMA != nil:
			m, src = p.Peak.RDMA, "device, all processes"
		}
		for k, v := range m {
			best[k] = max(best[k], v)
		}
	}
	if len(best) == 0 {
		return "–", "–", "–", ""
	}
	return fmt.Sprint(best["qp"]), fmt.Sprint(best["cq"]), fmt.Sprint(best["mr"]), src
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func f1(x float64) string { return fmt.Sprintf("%.1f", x) }

// ClientRate prints a per-client message rate: whole numbers from 100 up,
// three significant digits below, so that a client at 0.5 msg/s does not
// read as one that sent nothing.
func ClientRate(x float64) string {
	switch {
	case x == 0 || x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return trimZeros(fmt.Sprintf("%.1f", x))
	default:
		return trimZeros(fmt.Sprintf("%.2f", x))
	}
}
func f2(x float64) string { return trimZeros(fmt.Sprintf("%.2f", x)) }

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func limit(v int64) string {
	if v < 0 {
		return "unlimited"
	}
	return fmt.Sprint(v)
}

func bytesIEC(b float64) string {
	if b <= 0 {
		return "–"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
