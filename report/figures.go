package report

import (
	"sort"
	"strconv"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// This file holds what each report plots; plots.go, how a plot is drawn.

// Figures renders the run's plots: success rate with its interval,
// connect-time percentiles and server resources against clients, and CPU
// and memory over the whole run.
func Figures(run *result.Run, m *Model) []Plot {
	var succ Series
	for _, r := range m.Rows {
		succ.X = append(succ.X, float64(r.Clients))
		succ.Y = append(succ.Y, pctAxis(r.Rate))
		succ.Low = append(succ.Low, pctAxis(r.CILow))
		succ.High = append(succ.High, pctAxis(r.CIHigh))
	}
	plots := []Plot{percentLinePlot("success", "Success rate vs clients (95% CI)", "clients", "success %", []Series{succ})}

	p50, p95, p99 := Series{Label: "p50"}, Series{Label: "p95"}, Series{Label: "p99"}
	for _, n := range counts(run) {
		var a, b, c float64
		for _, p := range run.Points {
			if p.Clients == n && p.Connect.N > 0 {
				a, b, c = max(a, p.Connect.P50), max(b, p.Connect.P95), max(c, p.Connect.P99)
			}
		}
		if c > 0 {
			x := float64(n)
			p50.X, p50.Y = append(p50.X, x), append(p50.Y, a)
			p95.X, p95.Y = append(p95.X, x), append(p95.Y, b)
			p99.X, p99.Y = append(p99.X, x), append(p99.Y, c)
		}
	}
	plots = append(plots, linePlot("connect", "Connect time percentiles vs clients", "clients", "ms", []Series{p50, p95, p99}))

	qp, cq, mr := Series{Label: "QPs"}, Series{Label: "CQs"}, Series{Label: "MRs"}
	for _, r := range m.Rows {
		if r.Source == "" {
			continue
		}
		x := float64(r.Clients)
		for _, s := range []struct {
			ser *Series
			v   string
		}{{&qp, r.QPs}, {&cq, r.CQs}, {&mr, r.MRs}} {
			if v, err := strconv.Atoi(s.v); err == nil {
				s.ser.X, s.ser.Y = append(s.ser.X, x), append(s.ser.Y, float64(v))
			}
		}
	}
	plots = append(plots, linePlot("resources", "Server RDMA resources vs clients", "clients", "objects", []Series{qp, cq, mr}))

	cpu, srvCPU := Series{Label: "host CPU %"}, Series{Label: "server CPU % (per core)"}
	rss, hostMem := Series{Label: "server RSS MiB"}, Series{Label: "host memory used MiB"}
	for _, p := range run.Points {
		off := p.StartedAt.Sub(run.StartedAt).Seconds()
		if run.StartedAt.IsZero() || p.StartedAt.IsZero() {
			off = 0
		}
		for _, s := range p.Samples {
			t := off + s.T
			cpu.X, cpu.Y = append(cpu.X, t), append(cpu.Y, s.HostCPU)
			hostMem.X, hostMem.Y = append(hostMem.X, t), append(hostMem.Y, float64(s.HostMemUsed)/(1<<20))
			for _, ps := range s.Procs {
				if ps.Role == "server" {
					srvCPU.X, srvCPU.Y = append(srvCPU.X, t), append(srvCPU.Y, ps.CPU)
					rss.X, rss.Y = append(rss.X, t), append(rss.Y, float64(ps.RSS)/(1<<20))
				}
			}
		}
	}
	plots = append(plots, linePlot("cpu", "CPU over the run", "seconds since start", "%", []Series{cpu, srvCPU}))
	plots = append(plots, linePlot("memory", "Memory over the run", "seconds since start", "MiB", []Series{rss, hostMem}))
	return append(plots, trafficFigures(run)...)
}

func counts(run *result.Run) []int {
	seen := map[int]bool{}
	var out []int
	for _, p := range run.Points {
		if !seen[p.Clients] {
			seen[p.Clients] = true
			out = append(out, p.Clients)
		}
	}
	sort.Ints(out)
	return out
}

// benchCostPlot sets (a), (b), their sum and (c) side by side per mode.
func benchCostPlot(run *bench.Run) Plot {
	var groups []string
	a, b := Bars{Label: "(a) TLS handshake"}, Bars{Label: "(b) raw verbs"}
	ab, c := Bars{Label: "(a)+(b)"}, Bars{Label: "(c) full connect"}
	for _, n := range modes(run) {
		groups = append(groups, InFlight(n))
		cost := func(name string) float64 {
			if x := run.Find(name, n); x != nil && x.OK > 0 {
				return x.CostMS
			}
			return 0
		}
		a.Y, b.Y = append(a.Y, cost(bench.TLSHandshakeName)), append(b.Y, cost(bench.RawVerbsName))
		ab.Y = append(ab.Y, cost(bench.TLSHandshakeName)+cost(bench.RawVerbsName))
		c.Y = append(c.Y, cost(bench.FullConnectName))
	}
	return barPlot("bench-cost", "Cost per connection by mode", "ms per connection", groups, []Bars{a, b, ab, c}, 0, "")
}
