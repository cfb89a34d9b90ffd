package report

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

func timedPoint(n, trial, connected int, connectSec, startupSec, before, after float64) result.Point {
	p := result.Point{Clients: n, Trial: trial, Attempted: n, Connected: connected,
		ConnectSec: connectSec, StartupSec: startupSec}
	if before > 0 || after > 0 {
		p.Calibration = &result.Calibration{WindowSec: 0.25, BeforeHS: before, AfterHS: after}
	}
	return p
}

func TestRates(t *testing.T) {
	run := &result.Run{Backend: result.Backend{Name: "vm"}, Config: result.Config{Threshold: 1}, Points: []result.Point{
		timedPoint(300, 1, 300, 3, 0.5, 120, 120), // 100/s at 120 hs/s
		timedPoint(300, 2, 300, 6, 0.3, 60, 60),   // 50/s at 60 hs/s: a host at half speed
		timedPoint(1000, 1, 1000, 10, 0.4, 0, 0),  // no calibration
	}}
	m := NewModel(run)
	want := []RateRow{
		{Clients: 300, Trial: "1", Connected: 300, ConnectSec: "3", PerSec: "100", StartupSec: "0.5", HostHS: "120", PerHS: "0.83"},
		{Clients: 300, Trial: "2", Connected: 300, ConnectSec: "6", PerSec: "50", StartupSec: "0.3", HostHS: "60", PerHS: "0.83"},
		// 600 clients over 9 s; host speed weighted by connect time (120×3 + 60×6) / 9 = 80.
		{Clients: 300, Trial: "all", Connected: 600, ConnectSec: "9", PerSec: "67", StartupSec: "0.4", HostHS: "80", PerHS: "0.83", Pooled: true},
		{Clients: 1000, Trial: "1", Connected: 1000, ConnectSec: "10", PerSec: "100", StartupSec: "0.4", HostHS: "–", PerHS: "–"},
	}
	if len(m.Rates) != len(want) {
		t.Fatalf("rates %+v, want %d rows", m.Rates, len(want))
	}
	for i := range want {
		if m.Rates[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, m.Rates[i], want[i])
		}
	}
	answer := strings.Join(m.Answer.Sentences, "\n")
	for _, s := range []string{
		"Connection rate at 1000 clients: **100 connects/s**",
		"host's own speed moved during this run: its calibration ran at 60–120 handshakes/s (×2.00)",
		"300 clients: 67% raw, 0% per calibration handshake",
	} {
		if !strings.Contains(answer, s) {
			t.Errorf("answer lacks %q:\n%s", s, answer)
		}
	}
	if m.RateNote == "" {
		t.Error("no note on how rates were measured")
	}
	md, err := Markdown(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| 300     | all   | 600       | 9         | 67         | 0.4        | 80                | 0.83   |") {
		t.Errorf("Markdown lacks the pooled row:\n%s", md)
	}
	html, err := HTML(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), `<tr class="pooled"><td>300</td><td>all</td><td>600</td>`) {
		t.Error("HTML lacks the pooled row")
	}
}

func TestRatesSteadyHost(t *testing.T) {
	run := &result.Run{Backend: result.Backend{Name: "sim", Simulated: true}, Config: result.Config{Threshold: 1}, Points: []result.Point{
		timedPoint(100, 1, 100, 1, 0.2, 500, 520),
		timedPoint(100, 2, 100, 2, 0.2, 510, 490),
	}}
	run.Points[1].Calibration.AfterHS = 0
	run.Points[1].Calibration.Error = "calibration handshake: remote error"
	m := NewModel(run)
	if len(m.Notes) != 1 || m.Notes[0] != "100 clients, trial 2: calibration failed: calibration handshake: remote error" {
		t.Errorf("notes %q, want the failed calibration reading", m.Notes)
	}
	if r := m.Rates[1]; r.HostHS != "510" {
		t.Errorf("trial 2 host speed %q, want the reading that worked (510)", r.HostHS)
	}
	answer := strings.Join(m.Answer.Sentences, "\n")
	if strings.Contains(answer, "speed moved") {
		t.Errorf("a steady host (490–520 hs/s) flagged as moving:\n%s", answer)
	}
	if !strings.Contains(answer, "(simulated) Connection rate at 100 clients: **67 connects/s** pooled over 2 trials (50–100)") {
		t.Errorf("answer:\n%s", answer)
	}
}

func TestCompareShowsRates(t *testing.T) {
	timed := &result.Run{Backend: result.Backend{Name: "vm", Description: "vm: rxe0"}, Config: result.Config{Threshold: 1, ResourceMode: "srq"},
		Points: []result.Point{
			timedPoint(300, 1, 300, 3, 0.5, 120, 120),
			timedPoint(1000, 1, 1000, 10, 0.4, 100, 100),
			timedPoint(1000, 2, 1000, 10, 0.4, 100, 100),
		}}
	untimed := &result.Run{Backend: result.Backend{Name: "sim", Simulated: true}, Config: result.Config{Threshold: 1},
		Points: []result.Point{{Clients: 10, Attempted: 10, Connected: 10}}}
	c := NewComparison([]*result.Run{timed, untimed})
	n := len(SummaryHeader)
	if got := c.Summary[0][n-3:]; got[0] != "100 at 1000" || got[1] != "100" || got[2] != "1" {
		t.Errorf("timed run's rate columns %q, want the pooled rate at 1000 clients", got)
	}
	if got := c.Summary[1][n-3:]; got[0] != "–" || got[1] != "–" || got[2] != "–" {
		t.Errorf("untimed run's rate columns %q, want dashes", got)
	}
	for i, row := range c.Summary {
		if len(row) != n {
			t.Errorf("summary row %d has %d cells for %d columns", i, len(row), n)
		}
	}
}

// Runs that differ only in --detach or --tls-resume are told apart by
// their labels, not by a number.
func TestCompareLabelsNameCostOptions(t *testing.T) {
	base := result.Run{Backend: result.Backend{Name: "vm"}, Config: result.Config{Threshold: 1, ResourceMode: "srq", Detach: true}}
	resumed := base
	resumed.Config.TLSResume = true
	c := NewComparison([]*result.Run{&resumed, &base})
	if want := []string{"vm srq detached resumed", "vm srq detached"}; !reflect.DeepEqual(c.Labels, want) {
		t.Errorf("labels %q, want %q", c.Labels, want)
	}
}

// A per-client rate below 100 msg/s keeps three significant digits: a
// client at 0.5 msg/s must not print as 0, the figure of one that sent
// nothing.
func TestClientRate(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 0.5: "0.5", 0.123: "0.12", 3.5: "3.5", 12.34: "12.3", 99.96: "100", 1373.4: "1373"} {
		if got := ClientRate(x); got != want {
			t.Errorf("ClientRate(%g) = %q, want %q", x, got, want)
		}
	}
}

// A run of rdma_cm clients says in its report that no traffic phase ran,
// and why.
func TestRDMACMRunSaysNoTraffic(t *testing.T) {
	run := &result.Run{Mode: "ramp", Config: result.Config{ClientKind: result.ClientRDMACM},
		Points: []result.Point{{Clients: 10, Trial: 1, Attempted: 10, Connected: 10, SuccessRate: 1, Passed: true}}}
	md, err := Markdown(NewModel(run))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "no traffic phase ran") || !strings.Contains(string(md), "--client-kind rdmacm") {
		t.Errorf("the report does not say that rdma_cm clients ran no traffic phase:\n%s", md)
	}
	md, _ = Markdown(NewModel(&result.Run{Mode: "ramp", Points: run.Points}))
	if strings.Contains(string(md), "no traffic phase ran") {
		t.Error("a run of the built-in clients says it had rdma_cm clients")
	}
	// Against a server that echoes (--cm-server-echoes) the phase ran.
	run.Config.Traffic = &result.TrafficSetup{Op: result.OpSend, Depth: 1}
	md, _ = Markdown(NewModel(run))
	if strings.Contains(string(md), "no traffic phase ran") || !strings.Contains(string(md), "a server that echoes (--cm-server-echoes)") {
		t.Errorf("the report of rdma_cm clients with a traffic phase:\n%s", md)
	}
}
