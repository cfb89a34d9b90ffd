package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Pct formats a 0..1 rate as a percentage with at most one decimal.
func Pct(x float64) string {
	// One decimal, but never round a rate short of 100% (or above 0%) to
	// it: 99.96% is not 100%.
	var s string
	for d := 1; d <= 4; d++ {
		s = strconv.FormatFloat(x*100, 'f', d, 64)
		v, _ := strconv.ParseFloat(s, 64)
		if !(x < 1 && v >= 100) && !(x > 0 && v == 0) {
			break
		}
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + "%"
}

// Status is a row's verdict in the words the search's steps use, judged
// by the run's threshold (Count.Passed): ✅ pass, or ❌ fail, with
// "(SLO)" when its clients connected at the threshold but its traffic
// phase missed an objective (without a completion error).
func Status(r analysis.Count, threshold float64) string {
	st := "❌ fail"
	switch {
	case r.Passed:
		st = "✅ pass"
	case r.SLOFailed && !r.Errored && analysis.Passes(r.Connected, r.Attempted, threshold):
		st = "❌ fail (SLO)"
	}
	if r.Steps > 0 {
		st += " " + StepMark
	}
	return st
}

// StepMark marks a staircase's step (result.Point.Cumulative) wherever
// a view lists points: its clients were added on top of those held, so
// it is no fresh point.
const StepMark = "(step, cumulative)"

// StatusInterrupted is the status of a point cut short (result.Point.
// Interrupted): neither passed nor failed.
const StatusInterrupted = "⏸ interrupted"

// CutConnected is a point cut short's connected clients of those that
// had an outcome, of its client count: "1392/1400 of 2000".
func CutConnected(p result.Point) string {
	return strconv.Itoa(p.Connected) + "/" + strconv.Itoa(p.Attempted) + " of " + strconv.Itoa(p.Clients)
}

// cutFailures are a point cut short's failed outcomes so far.
func cutFailures(p result.Point) map[string]int {
	m := map[string]int{}
	for o, n := range p.Outcomes {
		if o != result.OutcomeOK && n > 0 {
			m[o] = n
		}
	}
	return m
}

// Terminal writes the success-rate table and the verdict; for a run of
// several server designs, each design's and the capacity-by-design table.
// width is the terminal's columns (screen.Width): 0 off a terminal.
func Terminal(w io.Writer, run *result.Run, width int) error {
	if run.DesignModes() != nil {
		return designTerminal(w, run, width)
	}
	return terminal(w, run, width, true)
}

// terminal writes one design's table and sentences; verdict also its
// verdict lines, which a run of several designs writes after them all.
func terminal(w io.Writer, run *result.Run, width int, verdict bool) error {
	t := table{header: []string{"Clients", "Connected", "Success", "95% CI", "Connect p50 ms", "Connect p99 ms", "Failures", "Status"},
		align: tw.AlignRight, drop: []string{"95% CI", "Connect p99 ms", "Connect p50 ms", "Failures"}}
	for _, r := range analysis.Pool(run.Points, run.Config.Threshold) {
		t.rows = append(t.rows, []string{
			strconv.Itoa(r.Clients),
			strconv.Itoa(r.Connected) + "/" + strconv.Itoa(r.Attempted),
			Pct(r.Rate),
			Pct(r.CILow) + "–" + Pct(r.CIHigh),
			fmt.Sprintf("%.1f", r.ConnectP50),
			fmt.Sprintf("%.1f", r.ConnectP99),
			failures(r.Failures),
			Status(r, run.Config.Threshold),
		})
	}
	if p := run.Interrupted; p != nil {
		t.rows = append(t.rows, []string{strconv.Itoa(p.Clients), CutConnected(*p), "–", "–",
			fmt.Sprintf("%.1f", p.Connect.P50), fmt.Sprintf("%.1f", p.Connect.P99), failures(cutFailures(*p)), StatusInterrupted})
	}
	left, err := t.render(w, width)
	if err != nil {
		return err
	}
	leftOut(w, width, left)
	if p := run.Interrupted; p != nil {
		screen.Println(w, width, analysis.CutShort(*p))
	}
	sim := ""
	if run.Backend.Simulated {
		sim = "(simulated) "
	}
	for _, s := range trafficSentences(run, sim) {
		screen.Println(w, width, strings.ReplaceAll(s, "**", ""))
	}
	if verdict {
		for _, l := range VerdictLines(analysis.Conclude(run)) {
			screen.Println(w, width, sim+l)
		}
		if pr := analysis.ProjectWalls(run); pr != nil {
			screen.Println(w, width, pr.Line())
		}
	}
	// How the search got there, when the run recorded why (runs before
	// reasons were recorded have only the notes, which the table says).
	if run.Search != nil && len(run.Search.Steps) > 0 && run.Search.Steps[0].Reason != "" {
		fmt.Fprintln(w, "Steps:")
		for i, s := range run.Search.Steps {
			verdict := "fail"
			if s.Passed {
				verdict = "pass"
			}
			head := fmt.Sprintf("%3d. %7d %s  ", i+1, s.Clients, verdict)
			if width <= 0 {
				fmt.Fprintln(w, head+StepNote(s))
				continue
			}
			// The note's further lines sit under its first.
			for _, l := range screen.Wrap(StepNote(s), width, head, strings.Repeat(" ", len(head))) {
				fmt.Fprintln(w, l)
			}
		}
	}
	return nil
}

// StepNote is a step's note with the reason it was chosen, when the run
// recorded one.
func StepNote(s result.Step) string {
	if s.Reason == "" {
		return s.Note
	}
	return s.Note + ": " + s.Reason
}

func failures(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %d", k, m[k])
	}
	return s
}
