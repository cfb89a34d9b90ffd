package bench

import (
	"bufio"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// The rdma_cm comparison (`rdmaprobe bench rdmacm`): rdmaprobe's rdma_cm
// load generator (client/rdmacm) against rdma-core's cmtime client, both
// connecting N RC connections to one cmtime server, in one guest, taken
// in turns (cmtime, rdmaprobe, cmtime, rdmaprobe, ...) so that the
// machine's slow spells fall on both.
//
// Each side's connects/s is its own tool's measure of the same work:
//
//   - cmtime: N ÷ the sum of its printed totals for create id, resolve
//     addr, resolve route, create qp and connect (CMTimeConnectSteps).
//     cmtime issues each step for all N connections before the next one
//     and times each step from its first call to its last completion; the
//     sum leaves out only its own bookkeeping between steps.
//   - rdmaprobe: connections established ÷ the time from the first
//     rdma_create_id to the last ESTABLISHED, all N started together
//     (in-flight window N).
const (
	// CMTimeClient and RDMAProbeClient name the two sides.
	CMTimeClient    = "cmtime"
	RDMAProbeClient = "rdmaprobe"
	// MinCMRatio is the target: rdmaprobe's connects/s at least cmtime's.
	MinCMRatio = 1.0
)

// The ways rdmaprobe's generator steps its connections
// (client/rdmacm.Config.Lockstep).
const (
	// CMInterleaved moves each connection on as its own events come:
	// one connection may be connecting while another still resolves.
	CMInterleaved = "interleaved"
	// CMLockstep issues each step for every connection of the window and
	// waits for all before the next step, as cmtime does.
	CMLockstep = "lockstep"
)

// CMTimeConnectSteps are the cmtime steps whose totals make its full
// connect (bind addr is left out: the client binds nothing without -b).
var CMTimeConnectSteps = []string{"create id", "resolve addr", "resolve route", "create qp", "connect"}

// CMTimeStep is one row of cmtime's step table.
type CMTimeStep struct {
	Name string `json:"name"`
	// TotalMS is from the step's first call to its last completion,
	// across all connections; MaxMS and MinUS are one connection's
	// longest and shortest; PerConnUS is TotalMS over N, in µs.
	TotalMS   float64 `json:"total_ms"`
	MaxMS     float64 `json:"max_ms"`
	MinUS     float64 `json:"min_us"`
	PerConnUS float64 `json:"per_conn_us"`
}

// ParseCMTime reads the step table cmtime (rdma-core v44) prints at the
// end of a client run:
//
//	step              total ms     max ms     min us  us / conn
//	create id    :       12.34       0.05       3.00      12.34
//
// It fails unless every step of CMTimeConnectSteps is there.
func ParseCMTime(out string) ([]CMTimeStep, error) {
	var steps []CMTimeStep
	header := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "step ") && strings.Contains(line, "total ms") {
			header, steps = true, nil
			continue
		}
		if !header {
			continue
		}
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 4 {
			continue
		}
		var v [4]float64
		bad := false
		for i, s := range f {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				bad = true
				break
			}
			v[i] = x
		}
		if bad {
			continue
		}
		steps = append(steps, CMTimeStep{Name: strings.TrimSpace(name), TotalMS: v[0], MaxMS: v[1], MinUS: v[2], PerConnUS: v[3]})
	}
	if !header {
		return nil, fmt.Errorf("cmtime printed no step table (%q): %s", "step  total ms ...", lastLine(out))
	}
	for _, want := range CMTimeConnectSteps {
		if findStep(steps, want) == nil {
			return nil, fmt.Errorf("cmtime's step table has no %q row", want)
		}
	}
	return steps, nil
}

func findStep(steps []CMTimeStep, name string) *CMTimeStep {
	for i := range steps {
		if steps[i].Name == name {
			return &steps[i]
		}
	}
	return nil
}

// CMTimeConnectSec is the sum of the totals of CMTimeConnectSteps, in
// seconds.
func CMTimeConnectSec(steps []CMTimeStep) float64 {
	var ms float64
	for _, name := range CMTimeConnectSteps {
		if s := findStep(steps, name); s != nil {
			ms += s.TotalMS
		}
	}
	return ms / 1000
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "no output"
	}
	return s
}

// CMRun is the rdma_cm comparison of a bench run (Run.RDMACM).
type CMRun struct {
	// N connections per measurement; Passes turns of every client.
	N      int `json:"n"`
	Passes int `json:"passes"`
	// Server is the cmtime server's command line, Addr where it listens.
	Server string `json:"server"`
	Addr   string `json:"addr"`
	// CMTime is the cmtime client's command line.
	CMTime string `json:"cmtime"`
	// Modes are the ways rdmaprobe's generator was run (CMInterleaved,
	// CMLockstep), each in every pass after cmtime.
	Modes []string `json:"modes"`
	// Measurements in the order taken.
	Measurements []CMMeasurement `json:"measurements"`
	// Ratios are each mode's median over passes of its connects/s over
	// the same pass's cmtime connects/s.
	Ratios []CMRatio `json:"ratios"`
	// Limits says what bounds both clients where they ran.
	Limits string `json:"limits,omitempty"`
}

// CMMeasurement is one client's N connections in one pass.
type CMMeasurement struct {
	Pass int `json:"pass"`
	// Client is CMTimeClient or RDMAProbeClient; Mode, for rdmaprobe,
	// how it stepped its connections.
	Client    string `json:"client"`
	Mode      string `json:"mode,omitempty"`
	Attempted int    `json:"attempted"`
	Connected int    `json:"connected"`
	// Sec is the time the connects took by the client's own measure
	// (CMRun's doc), PerSec Connected over Sec.
	Sec    float64 `json:"sec"`
	PerSec float64 `json:"per_sec"`
	// StepsMS: cmtime's step totals (its table), or rdmaprobe's p50 of
	// each step per connection (result.Phase* names): two meanings, so
	// no view shows it; it stays in the file as measured, and views show
	// CMStepTimes, like beside like.
	StepsMS map[string]float64 `json:"steps_ms,omitempty"`
	// CMTimeSteps is cmtime's table as printed.
	CMTimeSteps []CMTimeStep `json:"cmtime_steps,omitempty"`
	// PerConnMS is rdmaprobe's duration of each step per connection, from
	// its call to its completion (result.Phase* names): the shortest,
	// the median and the longest over the connections that connected.
	PerConnMS map[string]CMSpread `json:"per_conn_ms,omitempty"`
	// Outcomes counts rdmaprobe's attempts by outcome.
	Outcomes map[string]int `json:"outcomes,omitempty"`
	// SettleSec is how long the server took, after this measurement's
	// connections were closed, to free their QPs before the next.
	SettleSec float64 `json:"settle_sec,omitempty"`
	// Output is what cmtime's client printed (its last 16 KiB).
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
}

// CMSpread is one step's duration per connection, in ms.
type CMSpread struct {
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	Max float64 `json:"max"`
}

// CMStepNames are the connect steps both clients time, as cmtime names
// them, and rdmaprobe's phase for each.
var CMStepNames = [][2]string{
	{"resolve addr", result.PhaseResolveAddr},
	{"resolve route", result.PhaseResolveRoute},
	{"create qp", result.PhaseQPCreate},
	{"connect", result.PhaseEstablish},
}

// CMStepTime is one connect step of one client's N connections, each
// figure meaning the same whichever client measured it. A figure the
// client does not give is NaN: cmtime prints no median, rdmaprobe does
// not time a step across all its connections.
type CMStepTime struct {
	Step string
	// MinMS, P50MS and MaxMS are one connection's step, from its call to
	// its completion: the shortest, the median, the longest.
	MinMS, P50MS, MaxMS float64
	// AllMS is from the step's first call to its last completion over
	// all N connections (cmtime's "total ms").
	AllMS float64
}

// CMStepTimes are m's connect steps, like beside like: cmtime's min and
// max per connection and total over all N from its table, rdmaprobe's
// min, median and max per connection. Nil when m has neither.
func CMStepTimes(m CMMeasurement) []CMStepTime {
	nan := math.NaN()
	var out []CMStepTime
	for _, n := range CMStepNames {
		st := CMStepTime{Step: n[0], MinMS: nan, P50MS: nan, MaxMS: nan, AllMS: nan}
		if s := findStep(m.CMTimeSteps, n[0]); m.Client == CMTimeClient && s != nil {
			st.MinMS, st.MaxMS, st.AllMS = s.MinUS/1000, s.MaxMS, s.TotalMS
		} else if p, ok := m.PerConnMS[n[1]]; m.Client == RDMAProbeClient && ok {
			st.MinMS, st.P50MS, st.MaxMS = p.Min, p.P50, p.Max
		} else {
			continue
		}
		out = append(out, st)
	}
	return out
}

// CMRatio is one mode's result against cmtime.
type CMRatio struct {
	Mode string `json:"mode"`
	// ByPass is each pass's rdmaprobe/cmtime connects/s (0 where either
	// side connected nothing).
	ByPass []float64 `json:"by_pass"`
	Median float64   `json:"median"`
	Met    bool      `json:"met"`
}

// Summarise derives the ratios from the measurements.
func (c *CMRun) Summarise() {
	c.Ratios = nil
	for _, mode := range c.Modes {
		r := CMRatio{Mode: mode}
		var ok []float64
		for p := 1; p <= c.Passes; p++ {
			cm, rp := c.find(p, CMTimeClient, ""), c.find(p, RDMAProbeClient, mode)
			if cm == nil || rp == nil {
				continue
			}
			x := 0.0
			if cm.PerSec > 0 && rp.PerSec > 0 && cm.Error == "" && rp.Error == "" {
				x = rp.PerSec / cm.PerSec
				ok = append(ok, x)
			}
			r.ByPass = append(r.ByPass, x)
		}
		if len(ok) == 0 {
			continue
		}
		r.Median = median(ok)
		r.Met = r.Median >= MinCMRatio
		c.Ratios = append(c.Ratios, r)
	}
}

func (c *CMRun) find(pass int, client, mode string) *CMMeasurement {
	for i := range c.Measurements {
		m := &c.Measurements[i]
		if m.Pass == pass && m.Client == client && m.Mode == mode {
			return m
		}
	}
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
