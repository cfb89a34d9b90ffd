package report

import (
	"fmt"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/bench"
)

// cmModel is the report of the rdma_cm comparison (bench rdmacm).
func (m *BenchModel) cmModel(run *bench.Run) {
	cm := run.RDMACM
	m.CM = true
	m.Title = "rdmaprobe bench rdmacm on " + backendName(run.Backend)
	for _, r := range cm.Ratios {
		m.Answer = append(m.Answer, fmt.Sprintf("rdmaprobe's rdma_cm generator (%s) makes **%.2f ×** cmtime's connects/s at %d connections, median of %d passes in turns — target ≥ %.1f: **%s**.",
			r.Mode, r.Median, cm.N, len(r.ByPass), bench.MinCMRatio, metWord(r.Met)))
	}
	if len(cm.Ratios) == 0 {
		m.Answer = append(m.Answer, "No pass measured both cmtime and rdmaprobe, so there is no ratio to judge.")
	}
	if cm.Limits != "" {
		m.Answer = append(m.Answer, "What limits both: "+cm.Limits)
	}
	if !run.Complete {
		s := "**Incomplete run**: it stopped before the last measurement"
		if run.Error != "" {
			s += ": " + run.Error
		}
		m.Answer = append(m.Answer, s+".")
	}
	add := func(k, v string) {
		if v != "" {
			m.Env = append(m.Env, [2]string{k, v})
		}
	}
	add("Backend", backendName(run.Backend))
	add("Host", machine(run.Host, false))
	add("Connections", fmt.Sprintf("%d per client and pass, all started together; %d passes in turns (cmtime, then rdmaprobe in each mode)", cm.N, cm.Passes))
	add("Modes", strings.Join(cm.Modes, ", "))
	add("Server", "`"+cm.Server+"`")
	add("cmtime client", "`"+cm.CMTime+"`")
	if run.Config.TimeoutSec > 0 {
		add("Client timeout", fmt.Sprintf("%g s", run.Config.TimeoutSec))
	}

	m.Measurements = Table{ID: "measurements", Header: []string{"Pass", "Client", "Connected", "s", "connects/s", "× cmtime",
		"resolve addr ms/conn min–max", "resolve route ms/conn min–max", "create qp ms/conn min–max", "connect ms/conn min–max", "settle s"}}
	var base float64
	for _, x := range cm.Measurements {
		ratio := ""
		if x.Client == bench.CMTimeClient {
			base = x.PerSec
		} else if base > 0 && x.PerSec > 0 {
			ratio = fmt.Sprintf("%.2f", x.PerSec/base)
		}
		name := x.Client
		if x.Mode != "" {
			name += " (" + x.Mode + ")"
		}
		if x.Error != "" {
			name += ": " + x.Error
		}
		row := append([]string{fmt.Sprint(x.Pass), name, fmt.Sprintf("%d/%d", x.Connected, x.Attempted),
			fmt.Sprintf("%.2f", x.Sec), fmt.Sprintf("%.1f", x.PerSec), ratio}, CMSteps(x)...)
		m.Measurements.Rows = append(m.Measurements.Rows, append(row, fmt.Sprintf("%.1f", x.SettleSec)))
	}
	m.Ratios = Table{ID: "ratios", Header: []string{"Mode", "× cmtime by pass", "median", "≥ 1.0"}}
	for _, r := range cm.Ratios {
		var by []string
		for _, x := range r.ByPass {
			by = append(by, fmt.Sprintf("%.2f", x))
		}
		m.Ratios.Rows = append(m.Ratios.Rows, []string{r.Mode, strings.Join(by, ", "), fmt.Sprintf("%.2f", r.Median), metWord(r.Met)})
	}
	m.Plot = cmPlot(cm)
	m.benchMethod(run)
}

// CMSteps are a measurement's resolve addr, resolve route, create qp
// and connect figures, like beside like (bench.CMStepTimes): one
// connection's shortest and longest step, which both clients measure,
// from its call to its completion. Empty where the client measured none
// (an rdmaprobe measurement saved before per_conn_ms, whose steps_ms
// held a median per connection beside cmtime's totals over all N).
func CMSteps(x bench.CMMeasurement) []string {
	out := make([]string, len(bench.CMStepNames))
	for _, st := range bench.CMStepTimes(x) {
		for i, n := range bench.CMStepNames {
			if st.Step == n[0] {
				out[i] = msCell(st.MinMS) + "–" + msCell(st.MaxMS)
			}
		}
	}
	return out
}

// cmPlot is connects/s by pass, one bar per client.
func cmPlot(cm *bench.CMRun) Plot {
	var groups []string
	var series []Bars
	idx := map[string]int{}
	for p := 1; p <= cm.Passes; p++ {
		groups = append(groups, fmt.Sprintf("pass %d", p))
	}
	for _, x := range cm.Measurements {
		name := x.Client
		if x.Mode != "" {
			name += " (" + x.Mode + ")"
		}
		i, ok := idx[name]
		if !ok {
			i = len(series)
			idx[name] = i
			series = append(series, Bars{Label: name, Y: make([]float64, cm.Passes)})
		}
		if x.Pass >= 1 && x.Pass <= cm.Passes {
			series[i].Y[x.Pass-1] = x.PerSec
		}
	}
	return barPlot("bench-rdmacm", fmt.Sprintf("rdma_cm connects/s at %d connections, by pass", cm.N), "connects/s", groups, series, 0, "")
}
