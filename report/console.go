package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// The terminal's lines and tables: what a command prints as it runs,
// beside the files the rest of this package writes.

// PrintBench writes the measurements, the ratios against the targets and
// the full connect's phases, laid out for width columns (0: off a
// terminal).
func PrintBench(w io.Writer, run *bench.Run, width int) error {
	t := table{header: []string{"Measure", "Mode", "OK", "Conn/s", "ms/conn", "p50 ms", "p99 ms"}, align: tw.AlignRight,
		drop: []string{"p99 ms", "p50 ms"}}
	for _, m := range run.Measurements {
		t.rows = append(t.rows, []string{BenchMeasure(m.Name), InFlight(m.Concurrency), fmt.Sprintf("%d/%d", m.OK, m.Attempted),
			fmt.Sprintf("%.0f", m.PerSec), fmt.Sprintf("%.3f", m.CostMS),
			fmt.Sprintf("%.3f", m.LatencyMS.P50), fmt.Sprintf("%.3f", m.LatencyMS.P99)})
	}
	if err := t.print(w, width); err != nil {
		return err
	}

	t = table{header: []string{"Mode", "a+b ms/conn", "c ms/conn", "c/(a+b)", "≤ 1.5", "c rate / a rate", "≥ 60% (sim)"}, align: tw.AlignRight,
		drop: []string{"a+b ms/conn", "c ms/conn"}}
	for _, cmp := range run.Comparisons {
		a, b := run.Find(bench.TLSHandshakeName, cmp.Concurrency), run.Find(bench.RawVerbsName, cmp.Concurrency)
		c := run.Find(bench.FullConnectName, cmp.Concurrency)
		rateMet := "n/a"
		if run.Backend.Simulated {
			rateMet = yesNo(cmp.RateVsTLS >= bench.MinSimRateVsTLS)
		}
		t.rows = append(t.rows, []string{InFlight(cmp.Concurrency), fmt.Sprintf("%.3f", a.CostMS+b.CostMS),
			fmt.Sprintf("%.3f", c.CostMS), fmt.Sprintf("%.2f", cmp.CostRatio),
			yesNo(cmp.CostRatio <= bench.MaxCostRatio),
			fmt.Sprintf("%.0f%%", cmp.RateVsTLS*100), rateMet})
	}
	if err := t.print(w, width); err != nil {
		return err
	}

	if err := benchPhaseTable(w, width, run, bench.FullConnectName, "Full connect phase (client)", result.BuiltinPhases); err != nil {
		return err
	}
	if err := benchPhaseTable(w, width, run, bench.RawVerbsName, "Raw verbs, per pair", bench.Verbs); err != nil {
		return err
	}
	if run.Backend.Simulated {
		fmt.Fprintln(w, "(simulated fabric: the verbs figures are not RDMA measurements)")
	}
	return nil
}

// benchPhaseTable splits the measurements called name by phase, one column
// pair per concurrency; the means go first when the width is short.
func benchPhaseTable(w io.Writer, width int, run *bench.Run, name, title string, phases []string) error {
	var ms []*bench.Measurement
	t := table{header: []string{title}, align: tw.AlignRight}
	for i := range run.Measurements {
		if m := &run.Measurements[i]; m.Name == name && len(m.PhasesMS) > 0 {
			ms = append(ms, m)
			t.header = append(t.header, InFlight(m.Concurrency)+" p50 ms", InFlight(m.Concurrency)+" mean ms")
			t.drop = append(t.drop, InFlight(m.Concurrency)+" mean ms")
		}
	}
	if len(ms) == 0 {
		return nil
	}
	for _, ph := range phases {
		row := []string{ph}
		for _, m := range ms {
			p := m.PhasesMS[ph]
			row = append(row, fmt.Sprintf("%.3f", p.P50), fmt.Sprintf("%.3f", p.Mean))
		}
		t.rows = append(t.rows, row)
	}
	return t.print(w, width)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// CMClientName is an rdma_cm bench client with its mode, if any.
func CMClientName(m bench.CMMeasurement) string {
	if m.Mode != "" {
		return m.Client + " (" + m.Mode + ")"
	}
	return m.Client
}

// PrintCMBench writes two tables per pass, the connects/s of each client
// and their connect steps, each step column meaning the same for both
// clients; then each mode's median ratio and what limits both.
func PrintCMBench(w io.Writer, run *bench.Run, width int) error {
	cm := run.RDMACM
	for p := 1; p <= cm.Passes; p++ {
		var ms []bench.CMMeasurement
		for _, m := range cm.Measurements {
			if m.Pass == p {
				ms = append(ms, m)
			}
		}
		if len(ms) == 0 {
			continue
		}
		t := table{header: []string{fmt.Sprintf("Pass %d", p), "Connected", "s", "connects/s", "× cmtime"}, align: tw.AlignRight}
		var base float64
		for _, m := range ms {
			ratio := ""
			if m.Client == bench.CMTimeClient {
				base = m.PerSec
			} else if base > 0 && m.PerSec > 0 {
				ratio = fmt.Sprintf("%.2f", m.PerSec/base)
			}
			t.rows = append(t.rows, []string{CMClientName(m), fmt.Sprintf("%d/%d", m.Connected, m.Attempted),
				fmt.Sprintf("%.2f", m.Sec), fmt.Sprintf("%.1f", m.PerSec), ratio})
		}
		if err := t.print(w, width); err != nil {
			return err
		}
		t = table{header: []string{fmt.Sprintf("Pass %d step", p), "Client", "min ms/conn", "p50 ms/conn", "max ms/conn", "all N ms"},
			align: tw.AlignRight, drop: []string{"min ms/conn", "all N ms"}}
		rows := 0
		for _, n := range bench.CMStepNames {
			for _, m := range ms {
				for _, st := range bench.CMStepTimes(m) {
					if st.Step == n[0] {
						t.rows = append(t.rows, []string{st.Step, CMClientName(m), msCell(st.MinMS), msCell(st.P50MS), msCell(st.MaxMS), msCell(st.AllMS)})
						rows++
					}
				}
			}
		}
		if rows > 0 {
			if err := t.print(w, width); err != nil {
				return err
			}
		}
	}
	screen.Println(w, width, "(ms/conn: one connection's step, from its call to its completion; all N ms: from the step's first call to its last completion over all N, cmtime's total; — where the client does not measure it)")
	for _, r := range cm.Ratios {
		screen.Println(w, width, fmt.Sprintf("rdmaprobe (%s) / cmtime connects/s: median %.2f× over %d passes (%s) — target ≥ %.1f: %s",
			r.Mode, r.Median, len(r.ByPass), joinRatios(r.ByPass), bench.MinCMRatio, yesNo(r.Met)))
	}
	if cm.Limits != "" {
		screen.Println(w, width, "What limits both: "+cm.Limits)
	}
	return nil
}

// msCell is a step's figure in ms, or a dash where it was not measured.
func msCell(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

func joinRatios(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(s, ", ")
}

// PrintFindings prints what a run found beyond its table: the limiting
// factor of each design, named and placed as the run's verdict
// (analysis.Conclude) names it, with its diagnosis's evidence, and the
// PSN check; laid out for width columns (0: off a terminal).
func PrintFindings(w io.Writer, run *result.Run, width int) {
	for _, l := range FindingsLines(run) {
		screen.Println(w, width, l)
	}
	if t := run.Target; t != nil && len(t.Client) > 0 {
		fmt.Fprintln(w, "PSNs: not seen (client commands exchange their own)")
	} else {
		l := fmt.Sprintf("PSNs: %d connections, %d distinct (client, server) pairs", run.PSN.Connections, run.PSN.DistinctPairs)
		if !run.PSN.Unique {
			l += fmt.Sprintf(", %d REPEATED", run.PSN.DuplicatePairs)
		}
		screen.Println(w, width, l)
	}
}

// FindingsLines are the limiting-factor lines PrintFindings prints, one
// per design the verdict names a limit of: "limiting factor[ of
// DESIGN]: SUMMARY (LIMIT at N clients) → SUGGESTION".
func FindingsLines(run *result.Run) []string {
	var out []string
	for _, d := range analysis.Conclude(run).Designs {
		if d.Limit == "" {
			continue
		}
		sub, of := run, ""
		if d.Design != "" {
			sub, of = run.ForDesign(d.Design), " of "+d.Design
		}
		summary, suggestion := "", ""
		if diag, at := analysis.Limit(sub); diag != nil && diag.Limit == d.Limit && at == d.LimitAt {
			summary, suggestion = diag.Summary+" ", diag.Suggestion
		}
		l := fmt.Sprintf("limiting factor%s: %s(%s at %d clients)", of, summary, d.Limit, d.LimitAt)
		if suggestion != "" {
			l += " → " + suggestion
		}
		out = append(out, l)
	}
	return out
}

// PointLines are the lines a probe prints when a point ends: its
// clients and outcomes; its connect phase's times and rate; each
// generator host's share (HostLines); its traffic phase (TrafficLine).
func PointLines(pt result.Point, simulated bool) []string {
	tag := ""
	if simulated {
		tag = " [simulated]"
	}
	if pt.Interrupted {
		step := ""
		if pt.Cumulative {
			step = " " + StepMark
		}
		return []string{fmt.Sprintf("%6d clients%s: cut short (%s): %d connected of the %d that had an outcome, %.1f s%s; not a measurement of %d",
			pt.Clients, step, pt.Error, pt.Connected, pt.Attempted, pt.DurationSec, tag, pt.Clients)}
	}
	step := ""
	if pt.Cumulative {
		step = fmt.Sprintf(" %s, %d held before it", StepMark, pt.Held)
	}
	head := fmt.Sprintf("%6d clients%s: %d/%d connected (%s), %.1f s%s", pt.Clients, step, pt.Connected, pt.Attempted, Pct(pt.SuccessRate), pt.DurationSec, tag)
	var fails []string
	for _, o := range result.Outcomes {
		if o != result.OutcomeOK && pt.Outcomes[o] > 0 {
			fails = append(fails, fmt.Sprintf("%s %d", o, pt.Outcomes[o]))
		}
	}
	if len(fails) > 0 {
		head += " — " + strings.Join(fails, ", ")
	}
	if pt.Error != "" {
		head += " — point error: " + pt.Error
	}
	conn := fmt.Sprintf("        connect p50 %.1f ms, p99 %.1f ms", pt.Connect.P50, pt.Connect.P99)
	if pt.ConnectSec > 0 {
		conn += fmt.Sprintf("; %.0f connects/s over %.1f s", float64(pt.ConnectedHere())/pt.ConnectSec, pt.ConnectSec)
	}
	if hs := pt.Calibration.HS(); hs > 0 {
		conn += fmt.Sprintf("; host speed %.0f handshakes/s", hs)
	}
	if pt.TLSResumed > 0 {
		conn += fmt.Sprintf("; %d TLS sessions resumed", pt.TLSResumed)
	}
	if pt.QPs > 0 {
		conn += fmt.Sprintf("; logical clients on %d QPs", pt.QPs)
	}
	out := append([]string{head, conn}, HostLines(pt)...)
	if l := TrafficLine(pt); l != "" {
		out = append(out, l)
	}
	return out
}

// HostLines say each generator host's share of a point, when the
// generators ran on other hosts.
func HostLines(pt result.Point) []string {
	var out []string
	for _, h := range pt.Hosts {
		l := fmt.Sprintf("        %s: %d/%d connected (%s)", h.Host, h.Connected, h.Attempted, Pct(h.SuccessRate))
		if h.ConnectRate > 0 {
			l += fmt.Sprintf(", %.0f connects/s", h.ConnectRate)
		}
		if h.GID != "" {
			l += ", GID " + h.GID
		}
		for _, f := range h.Faults {
			l += fmt.Sprintf(" — generator %d %s: %s", f.Generator, f.Class, f.Detail)
		}
		out = append(out, l)
	}
	return out
}
