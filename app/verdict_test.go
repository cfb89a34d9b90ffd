package app

import (
	"bytes"
	"encoding/json"
	"html"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/internal/rungen"
	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/live"
	"github.com/rdmaprobe/rdmaprobe/report"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Every view of a run states one verdict (issue 49): over 1,000
// generated runs (rungen), the terminal, report.md, report.html, the
// saved run.json, the run_end event, the capacity metric and the
// --require gate state the figures analysis.Conclude derives, and those
// figures keep the rules: a point cut short counts nowhere, advice stops
// at a hard limit, the table's status and the steps say the same word.
//
// The seeds are split among parallel subtests, two at a time on two
// cores: the views are in-process work that starts no process
// (noChildren's concern), and parallel subtests run beside no other test.
func TestViewsStateOneVerdict(t *testing.T) {
	const runs, parts = 1000, 4
	// seen counts the kinds of run generated: each must come up.
	seen := map[string]int{}
	var mu sync.Mutex
	t.Run("seeds", func(t *testing.T) {
		for part := range uint64(parts) {
			t.Run(strconv.FormatUint(part, 10), func(t *testing.T) {
				t.Parallel()
				for seed := part; seed < runs; seed += parts {
					kinds := viewsStateOneVerdict(t, seed)
					mu.Lock()
					for _, k := range kinds {
						seen[k]++
					}
					mu.Unlock()
				}
			})
		}
	})
	for _, k := range []string{"cut " + rungen.CutConnect, "cut " + rungen.CutTraffic, "cut " + rungen.CutHold,
		"wall", "designs", "traffic", "slo", "criterion traffic", "require met", "require not met", "non-monotonic", "trials", "performant", "bend", "peak slo"} {
		if seen[k] < 10 {
			t.Errorf("%d of %d runs had %s, want at least 10: the generator misses a case", seen[k], runs, k)
		}
	}
}

// viewsStateOneVerdict checks the run of seed (TestViewsStateOneVerdict)
// and returns the kinds of run it is.
func viewsStateOneVerdict(t *testing.T, seed uint64) []string {
	seen := map[string]int{}
	g := rungen.Run(rand.New(rand.NewPCG(seed, 49)))
	run := g.Run
	if g.Cut != "" {
		seen["cut "+g.Cut]++
	}
	if g.Cap > 0 {
		seen["wall"]++
	}
	if run.DesignModes() != nil {
		seen["designs"]++
	}
	if c := run.Config; c.Traffic != nil {
		seen["traffic"]++
		if c.SLO != "" {
			seen["slo"]++
		}
		if c.Criterion == result.CriterionTraffic {
			seen["criterion traffic"]++
		}
	}
	if r := run.Verdict.Require; r != nil && r.Met {
		seen["require met"]++
	} else if r != nil {
		seen["require not met"]++
	}
	for _, d := range run.Verdict.Designs {
		if len(d.NonMonotonic) > 0 {
			seen["non-monotonic"]++
			break
		}
	}
	if run.Config.Trials > 1 {
		seen["trials"]++
	}
	if strings.Contains(run.Config.SLO, "peak") {
		seen["peak slo"]++
	}
	for _, d := range run.Verdict.Designs {
		if d.Bend != nil {
			seen["performant"]++
			if d.Bend.BendAt > 0 {
				seen["bend"]++
			}
			break
		}
	}
	want := analysis.Conclude(run)
	fail := func(format string, a ...any) {
		t.Helper()
		t.Errorf("seed %d: "+format, append([]any{seed}, a...)...)
	}
	lines := report.VerdictLines(want)

	// Off a terminal (width 0) each line is whole; on one of 80
	// columns every line fits and says the same words.
	var term, narrow bytes.Buffer
	if err := report.Terminal(&term, run, 0); err != nil {
		t.Fatal(err)
	}
	if err := report.Terminal(&narrow, run, screen.MinWidth); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(narrow.String(), "\n") {
		if screen.Cols(l) > screen.MinWidth {
			fail("a line of %d columns at %d:\n%s", screen.Cols(l), screen.MinWidth, l)
		}
	}
	words := strings.Join(strings.Fields(narrow.String()), " ")
	docs := report.Documents(run, false)
	overview := docs[len(docs)-1]
	md, err := overview.Markdown()
	if err != nil {
		t.Fatal(err)
	}
	page, err := overview.HTML()
	if err != nil {
		t.Fatal(err)
	}
	// The probe's own sentence (search.verdict, which old runs
	// carry) is a second derivation: no view prints it.
	if s := run.Search; s != nil && s.Verdict != "" {
		if strings.Contains(term.String(), s.Verdict) || strings.Contains(string(md), s.Verdict) {
			fail("a view prints search.verdict %q beside the verdict", s.Verdict)
		}
	}
	for _, l := range lines {
		if !strings.Contains(term.String(), l) {
			fail("the terminal lacks %q:\n%s", l, term.String())
		}
		if !strings.Contains(words, strings.Join(strings.Fields(l), " ")) {
			fail("the terminal at %d columns lacks %q:\n%s", screen.MinWidth, l, narrow.String())
		}
		if !strings.Contains(string(md), l) {
			fail("report.md lacks %q", l)
		}
		if !strings.Contains(string(page), html.EscapeString(l)) {
			fail("report.html lacks %q", l)
		}
	}

	// The findings line names each design's limiting factor where
	// the verdict does, and no other.
	var found bytes.Buffer
	report.PrintFindings(&found, run, 0)
	nfound := strings.Count(found.String(), "limiting factor")
	for _, d := range want.Designs {
		if d.Limit == "" {
			continue
		}
		nfound--
		of := ""
		if d.Design != "" {
			of = " of " + d.Design
		}
		if !regexp.MustCompile(`(?m)^limiting factor` + regexp.QuoteMeta(of) + `: .*\(` + regexp.QuoteMeta(d.Limit) + ` at ` + strconv.Itoa(d.LimitAt) + ` clients\)`).MatchString(found.String()) {
			fail("the findings lack design %q's %s at %d:\n%s", d.Design, d.Limit, d.LimitAt, found.String())
		}
	}
	if nfound != 0 {
		fail("the findings name %d limiting factors the verdict does not:\n%s", nfound, found.String())
	}

	// run.json: encoded as saved, read back and derived again, the
	// same figures.
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := result.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*loaded.Verdict, want) || !reflect.DeepEqual(analysis.Conclude(loaded), want) {
		fail("run.json's verdict %+v, derived again %+v; want %+v", *loaded.Verdict, analysis.Conclude(loaded), want)
	}

	// run_end.
	var ev bytes.Buffer
	live.NewEvents(&ev).RunEnds(run, "run.json", nil)
	var end live.Event
	if err := json.Unmarshal(ev.Bytes(), &end); err != nil || end.Verdict == nil || !reflect.DeepEqual(*end.Verdict, want) {
		fail("run_end's verdict %+v (%v), want %+v", end.Verdict, err, want)
	}

	// The capacity metric.
	m := live.NewRegistry(live.Labels{RunID: "r", Backend: "sim", Command: "ramp"})
	m.RunEnds(run.Verdict)
	got := map[string]float64{}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rdmaprobe_capacity_clients" {
			continue
		}
		for _, s := range mf.GetMetric() {
			var d, f string
			for _, l := range s.GetLabel() {
				switch l.GetName() {
				case "design":
					d = l.GetValue()
				case "figure":
					f = l.GetValue()
				}
			}
			got[d+"/"+f] = s.GetGauge().GetValue()
		}
	}
	for _, d := range want.Designs {
		for f, n := range map[string]int{"capacity": d.Capacity, "max_connected": d.MaxConnected, "first_failure": d.FirstFail} {
			if got[d.Design+"/"+f] != float64(n) {
				fail("metric %s of %q is %v, want %d", f, d.Design, got[d.Design+"/"+f], n)
			}
		}
		if v, ok := got[d.Design+"/max_sustainable"]; ok != (d.MaxSustainable >= 0) || ok && v != float64(d.MaxSustainable) {
			fail("metric max_sustainable of %q: %v (%v), want %d", d.Design, v, ok, d.MaxSustainable)
		}
		if v, ok := got[d.Design+"/performant"]; ok != (d.Bend != nil) || ok && v != float64(d.Bend.Performant) {
			fail("metric performant of %q: %v (%v), want %+v", d.Design, v, ok, d.Bend)
		}
	}

	// The --require gate.
	if r := want.Require; r != nil {
		if _, met := report.RequireLine(run); met != r.Met {
			fail("--require %d:%s: the gate says met=%v, the verdict %v", r.Clients, r.Criterion, met, r.Met)
		}
	}

	// The design table states each design's performant count.
	for i, row := range report.DesignRows(run) {
		b := want.Designs[i].Bend
		if b == nil && row.Performant != "–" || b != nil && strings.TrimPrefix(row.Performant, "≥ ") != strconv.Itoa(b.Performant) {
			fail("design %s's table row says performant %q, the verdict %+v", row.Design, row.Performant, b)
		}
	}

	checkRules(t, seed, g, want, term.String(), string(md))
	var kinds []string
	for k := range seen {
		kinds = append(kinds, k)
	}
	return kinds
}

// checkRules checks the verdict against what the run was generated
// from, and the table's words against the steps'.
func checkRules(t *testing.T, seed uint64, g rungen.Gen, v result.Verdict, term, md string) {
	t.Helper()
	run := g.Run
	fail := func(format string, a ...any) {
		t.Helper()
		t.Errorf("seed %d: "+format, append([]any{seed}, a...)...)
	}
	// The point cut short counts nowhere: without it, the same figures.
	if run.Interrupted != nil {
		if v.Interrupted != run.Interrupted.Clients {
			fail("interrupted %d, want %d", v.Interrupted, run.Interrupted.Clients)
		}
		bare := *run
		bare.Interrupted = nil
		if w := analysis.Conclude(&bare); !reflect.DeepEqual(w.Designs, v.Designs) {
			fail("the point cut short (%s phase) moved the verdict: %+v, without it %+v", g.Cut, v.Designs, w.Designs)
		}
		if !regexp.MustCompile(`(?m)^\s*` + strconv.Itoa(run.Interrupted.Clients) + `\s[^\n]*⏸ interrupted`).MatchString(term) {
			fail("the terminal has no interrupted row for %d", run.Interrupted.Clients)
		}
	}
	for i, d := range v.Designs {
		sub := run
		if d.Design != "" {
			sub = run.ForDesign(d.Design)
		}
		passed := map[int]bool{}
		for _, c := range analysis.Pool(sub.Points, v.Threshold) {
			passed[c.Clients] = c.Passed
		}
		if d.FirstFail != 0 && (d.Capacity >= d.FirstFail || passed[d.FirstFail]) || d.Capacity != 0 && !passed[d.Capacity] {
			fail("design %q: capacity %d, first failure %d, passed %v", d.Design, d.Capacity, d.FirstFail, passed)
		}
		if g.Cap > 0 && d.Wall != 0 && d.Wall <= g.Cap {
			fail("design %q: wall at %d, yet the device held %d", d.Design, d.Wall, g.Cap)
		}
		for _, rec := range []int{d.Conservative, d.Practical} {
			if d.Wall > 0 && rec >= d.Wall && !passed[rec] {
				fail("design %q: recommends %d at or past the wall at %d", d.Design, rec, d.Wall)
			}
		}
		checkBend(t, seed, sub, d.Bend)
		// The headline states the same capacity, first failure and max
		// connected.
		if run.DesignModes() == nil {
			if d.Capacity > 0 && !strings.Contains(md, "**"+strconv.Itoa(d.Capacity)+" clients** pass at the") {
				fail("report.md's headline does not pass %d", d.Capacity)
			}
			if d.FirstFail > 0 && !strings.Contains(md, "Failures begin at **"+strconv.Itoa(d.FirstFail)+" clients**") {
				fail("report.md's headline does not begin failures at %d", d.FirstFail)
			}
			if d.MaxSustainable >= 0 && !strings.Contains(md, "Max connected: **"+strconv.Itoa(d.MaxConnected)+"**; max sustainable") {
				fail("report.md's traffic sentence does not say max connected %d", d.MaxConnected)
			}
		}
		// The table's status and the steps say the same word of a count.
		s := sub.Search
		if s == nil && i < len(run.Designs) {
			s = run.Designs[i].Search
		}
		if s == nil || run.DesignModes() != nil {
			continue
		}
		for _, st := range s.Steps {
			word := "fail"
			if st.Passed {
				word = "pass"
			}
			if st.Passed != passed[st.Clients] {
				fail("step %d says %s, the verdict's count passed=%v", st.Clients, word, passed[st.Clients])
			}
			row := regexp.MustCompile(`\|\s*` + strconv.Itoa(st.Clients) + `\s*\|[^\n]*\|\s*(✅|❌) (\w+)`).FindStringSubmatch(md)
			if row == nil || row[2] != word {
				fail("report.md's row for %d says %v, its step %s", st.Clients, row, word)
			}
		}
	}
}

// checkBend holds a design's performant count to its definition,
// worked out here apart from analysis.Bend: stated with three counts of
// completed traffic or more below the smallest count a trial did not
// hold all its clients at (a wall); every count up to it, each its trials'
// median (the lower middle), reaches (1−ε) of the best up to it, and
// the count after it does not.
func checkBend(t *testing.T, seed uint64, run *result.Run, b *result.Bend) {
	t.Helper()
	wall := math.MaxInt
	for _, p := range run.Points {
		if p.Connected < p.Clients {
			wall = min(wall, p.Clients)
		}
	}
	rates := map[int][]float64{}
	for _, p := range run.Points {
		if p.Traffic != nil && p.Traffic.Error == "" && p.Clients < wall {
			rates[p.Clients] = append(rates[p.Clients], p.Traffic.MsgRate)
		}
	}
	if (len(rates) >= 3) != (b != nil) {
		t.Errorf("seed %d: %d counts of traffic, performant %+v", seed, len(rates), b)
		return
	}
	if b == nil {
		return
	}
	eps := analysis.DefaultEpsilon
	if i := strings.Index(run.Config.SLO, "*peak"); i >= 0 {
		f, _ := strconv.ParseFloat(run.Config.SLO[strings.LastIndex(run.Config.SLO[:i], "=")+1:i], 64)
		eps = 1 - f
	}
	if math.Abs(b.Epsilon-eps) > 1e-9 {
		t.Errorf("seed %d: ε %v, the SLO %q says %v", seed, b.Epsilon, run.Config.SLO, eps)
	}
	var ns []int
	for n := range rates {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	peak, want, bendAt := 0.0, 0, 0
	for _, n := range ns {
		rs := rates[n]
		slices.Sort(rs)
		m := rs[(len(rs)-1)/2]
		peak = max(peak, m)
		if m < (1-eps)*peak {
			bendAt = n
			break
		}
		want = n
	}
	if b.Performant != want || b.BendAt != bendAt {
		t.Errorf("seed %d: performant %d, bend at %d; want %d, %d (rates %v)", seed, b.Performant, b.BendAt, want, bendAt, rates)
	}
}
