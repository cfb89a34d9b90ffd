package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// PointRow pools the trials at one client count.
type PointRow struct {
	Clients, Trials, Attempted, Connected int
	Rate, CILow, CIHigh                   float64
	ConnectP50, ConnectP99                float64
	Passed                                bool
	Failures                              map[string]int
}

// Rows pools a run's points by client count, in increasing order. The
// interval is recomputed on the pooled counts by ci.
func Rows(points []result.Point, threshold float64, ci func(k, n int) (float64, float64)) []PointRow {
	by := map[int]*PointRow{}
	for _, p := range points {
		r := by[p.Clients]
		if r == nil {
			r = &PointRow{Clients: p.Clients, Failures: map[string]int{}}
			by[p.Clients] = r
		}
		r.Trials++
		r.Attempted += p.Attempted
		r.Connected += p.Connected
		// Percentiles do not pool exactly; show the worst trial's.
		if p.Connect.P50 > r.ConnectP50 {
			r.ConnectP50 = p.Connect.P50
		}
		if p.Connect.P99 > r.ConnectP99 {
			r.ConnectP99 = p.Connect.P99
		}
		for o, n := range p.Outcomes {
			if o != result.OutcomeOK {
				r.Failures[o] += n
			}
		}
	}
	var out []PointRow
	for _, r := range by {
		if r.Attempted > 0 {
			r.Rate = float64(r.Connected) / float64(r.Attempted)
		}
		r.CILow, r.CIHigh = ci(r.Connected, r.Attempted)
		r.Passed = r.Attempted > 0 && r.Rate >= threshold
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Clients < out[j].Clients })
	return out
}

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

// Status is the symbol of a row: ✅ at the threshold, ⚠️ at ≥ 90% of
// it... simplified: ✅ passed, ⚠️ ≥ 90%, ❌ below.
func Status(r PointRow) string {
	switch {
	case r.Passed:
		return "✅ pass"
	case r.Rate >= 0.9:
		return "⚠️ degraded"
	default:
		return "❌ fail"
	}
}

// Terminal writes the success-rate table and the verdict.
func Terminal(w io.Writer, run *result.Run, ci func(k, n int) (float64, float64)) error {
	rows := Rows(run.Points, run.Config.Threshold, ci)
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint()),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignment(tw.AlignRight),
	)
	t.Header([]string{"Clients", "Connected", "Success", "95% CI", "Connect p50 ms", "Connect p99 ms", "Failures", "Status"})
	for _, r := range rows {
		t.Append([]string{
			strconv.Itoa(r.Clients),
			strconv.Itoa(r.Connected) + "/" + strconv.Itoa(r.Attempted),
			Pct(r.Rate),
			Pct(r.CILow) + "–" + Pct(r.CIHigh),
			fmt.Sprintf("%.1f", r.ConnectP50),
			fmt.Sprintf("%.1f", r.ConnectP99),
			failures(r.Failures),
			Status(r),
		})
	}
	if err := t.Render(); err != nil {
		return err
	}
	if run.Search != nil && run.Search.Verdict != "" {
		prefix := ""
		if run.Backend.Simulated {
			prefix = "(simulated) "
		}
		fmt.Fprintln(w, prefix+run.Search.Verdict)
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
			fmt.Fprintf(w, "%3d. %7d %s  %s\n", i+1, s.Clients, verdict, StepNote(s))
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
