package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// RateRow is one trial's connection rate, or (Trial "all") a client
// count's pooled rate: connected clients over the summed connect time.
type RateRow struct {
	Clients   int
	Trial     string
	Connected int
	// ConnectSec is the time from releasing the load generators to the
	// last client's outcome; StartupSec the server's and generators'
	// start-up before it ("–" in runs that did not time it).
	ConnectSec, StartupSec string
	PerSec                 string
	// HostHS is the calibration (result.Calibration.HS) in handshakes/s,
	// PerHS the connect rate divided by it: connects per calibration
	// handshake, which compares trials taken at different host speeds.
	HostHS, PerHS string
	Pooled        bool
}

const rateNote = "Connects/s is connected clients over the connect time, from the load generators' release to the last client's outcome; " +
	"the server's and generators' start-up before the release is shown apart and not counted. " +
	"Host speed is the machine's calibration around each point: serial mutual TLS 1.3 handshakes per second in one process, " +
	"the mean of a reading just before the server starts and one just after the last outcome; " +
	"per hs is connects/s divided by it, which compares trials taken while the host ran at different speeds. " +
	"Rows \"all\" pool a count's trials."

// rateTrial is one point with a timed connect phase.
type rateTrial struct {
	clients, trial, connected int
	connect, startup, hs      float64
}

func (t rateTrial) perSec() float64 { return float64(t.connected) / t.connect }

// rates fills m.Rates and adds the connect rate, and whether the host's
// speed moved under it, to the answer.
func (m *Model) rates(run *result.Run) {
	by := map[int][]rateTrial{}
	for _, p := range run.Points {
		if c := p.Calibration; c != nil && c.Error != "" {
			m.Notes = append(m.Notes, fmt.Sprintf("%d clients, trial %d: calibration failed: %s", p.Clients, p.Trial, c.Error))
		}
		if p.ConnectSec <= 0 || p.ConnectedHere() == 0 {
			continue
		}
		t := rateTrial{clients: p.Clients, trial: p.Trial, connected: p.ConnectedHere(), connect: p.ConnectSec,
			startup: p.StartupSec, hs: p.Calibration.HS()}
		by[p.Clients] = append(by[p.Clients], t)
	}
	counts := make([]int, 0, len(by))
	for n := range by {
		counts = append(counts, n)
	}
	sort.Ints(counts)
	for _, n := range counts {
		ts := by[n]
		sort.Slice(ts, func(i, j int) bool { return ts[i].trial < ts[j].trial })
		var pool rateTrial
		pool.clients = n
		hsN := 0
		for _, t := range ts {
			m.Rates = append(m.Rates, rateRow(t, fmt.Sprint(t.trial), false))
			pool.connected += t.connected
			pool.connect += t.connect
			pool.startup += t.startup
			if t.hs > 0 {
				// Weighted by connect time: the host speed the pooled
				// rate was measured at.
				pool.hs += t.hs * t.connect
				hsN++
			}
		}
		if len(ts) > 1 {
			if hsN == len(ts) {
				pool.hs /= pool.connect
			} else {
				pool.hs = 0
			}
			pool.startup /= float64(len(ts))
			m.Rates = append(m.Rates, rateRow(pool, "all", true))
		}
		if n == counts[len(counts)-1] {
			m.Answer.Sentences = append(m.Answer.Sentences, rateSentence(m.Simulated, pool, ts))
		}
	}
	if len(m.Rates) > 0 {
		m.RateNote = rateNote
	}
	if s := hostSpeedNote(counts, by); s != "" {
		m.Answer.Sentences = append(m.Answer.Sentences, s)
	}
}

func rateRow(t rateTrial, trial string, pooled bool) RateRow {
	r := RateRow{Clients: t.clients, Trial: trial, Connected: t.connected, ConnectSec: f2(t.connect),
		PerSec: fmt.Sprintf("%.0f", t.perSec()), StartupSec: "–", HostHS: "–", PerHS: "–", Pooled: pooled}
	if t.startup > 0 {
		r.StartupSec = f2(t.startup)
	}
	if t.hs > 0 {
		r.HostHS = fmt.Sprintf("%.0f", t.hs)
		r.PerHS = f2(t.perSec() / t.hs)
	}
	return r
}

func rateSentence(sim bool, pool rateTrial, ts []rateTrial) string {
	s := ""
	if sim {
		s = "(simulated) "
	}
	s += fmt.Sprintf("Connection rate at %d clients: **%.0f connects/s**", pool.clients, pool.perSec())
	if len(ts) > 1 {
		rates := make([]float64, len(ts))
		for i, t := range ts {
			rates[i] = t.perSec()
		}
		lo, hi := minMax(rates)
		s += fmt.Sprintf(" pooled over %d trials (%.0f–%.0f)", len(ts), lo, hi)
	}
	return s + ", timed from the load generators' release to the last client's outcome."
}

// hostSpeedNote says when the machine's own speed moved by more than a
// quarter between points, and at which counts the connect rates moved with
// it (their spread shrinks once divided by the calibration).
func hostSpeedNote(counts []int, by map[int][]rateTrial) string {
	var hs []float64
	var with []string
	for _, n := range counts {
		var raw, norm []float64
		for _, t := range by[n] {
			if t.hs > 0 {
				hs = append(hs, t.hs)
				raw = append(raw, t.perSec())
				norm = append(norm, t.perSec()/t.hs)
			}
		}
		if len(raw) > 1 && spread(norm) < spread(raw) {
			with = append(with, fmt.Sprintf("%d clients: %.0f%% raw, %.0f%% per calibration handshake", n, 100*spread(raw), 100*spread(norm)))
		}
	}
	if len(hs) < 2 {
		return ""
	}
	lo, hi := minMax(hs)
	if hi < 1.25*lo {
		return ""
	}
	s := fmt.Sprintf("⚠️ The host's own speed moved during this run: its calibration ran at %.0f–%.0f handshakes/s (×%.2f) between points", lo, hi, hi/lo)
	if len(with) > 0 {
		s += "; trial rates moved with it (spread between trials at " + strings.Join(with, "; ") +
			"), so compare trials by connects per calibration handshake rather than connects/s"
	}
	return s + "."
}

func minMax(xs []float64) (lo, hi float64) {
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// spread is (max - min) / mean.
func spread(xs []float64) float64 {
	lo, hi := minMax(xs)
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return (hi - lo) / (sum / float64(len(xs)))
}
