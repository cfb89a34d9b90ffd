package bench

import (
	"bufio"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The rdma_cm comparison (`rdmaprobe bench rdmacm`): rdmaprobe's rdma_cm
// load generator (fabric/rdmacm) against rdma-core's cmtime client, both
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
// (fabric/rdmacm.Config.Lockstep).
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
	// each step per connection (result.Phase* names).
	StepsMS map[string]float64 `json:"steps_ms,omitempty"`
	// CMTimeSteps is cmtime's table as printed.
	CMTimeSteps []CMTimeStep `json:"cmtime_steps,omitempty"`
	// Outcomes counts rdmaprobe's attempts by outcome.
	Outcomes map[string]int `json:"outcomes,omitempty"`
	// SettleSec is how long the server took, after this measurement's
	// connections were closed, to free their QPs before the next.
	SettleSec float64 `json:"settle_sec,omitempty"`
	// Output is what cmtime's client printed (its last 16 KiB).
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
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
