// Package cmbench runs the rdma_cm comparison of `rdmaprobe bench
// rdmacm` where the RDMA device is (inside the Soft-RoCE guest on the vm
// backend): one cmtime server for the whole run, and per pass cmtime's
// client, then rdmaprobe's generator (client/rdmacm) in each mode asked
// for, every one making N connections to that server. The clients take
// turns rather than run together, so neither measures against the
// other's load; between turns the server is given time to free the last
// turn's QPs. What each side's connects/s means is bench.CMRun's doc.
package cmbench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/client/rdmacm"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/fabric/verbs"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Config is one comparison.
type Config struct {
	// CMTime is the cmtime program (the server and the client).
	CMTime string
	// Addr and Port are where the server listens: an address of the
	// netdev Device is on, since rdma_cm resolves no route on lo.
	Addr   string
	Port   int
	Device string
	// N connections per measurement, Passes turns, Modes of rdmaprobe's
	// generator (bench.CMInterleaved, bench.CMLockstep).
	N, Passes int
	Modes     []string
	// Timeout bounds each client's measurement.
	Timeout time.Duration
}

// settleTimeout bounds the wait for the server to free a turn's QPs.
const settleTimeout = 2 * time.Minute

// Run makes the comparison; progress gets each measurement as it is
// taken. An error is one that ends the run (the server would not start
// or died, ctx ended); what it measured before is returned with it.
func Run(ctx context.Context, cfg Config, progress func(bench.CMMeasurement)) (*bench.CMRun, error) {
	port := strconv.Itoa(cfg.Port)
	srvArgv := []string{cfg.CMTime, "-b", cfg.Addr, "-p", port, "-c", strconv.Itoa(cfg.N)}
	cliArgv := []string{cfg.CMTime, "-s", cfg.Addr, "-p", port, "-c", strconv.Itoa(cfg.N)}
	run := &bench.CMRun{N: cfg.N, Passes: cfg.Passes, Modes: cfg.Modes, Addr: net.JoinHostPort(cfg.Addr, port),
		Server: strings.Join(srvArgv, " "), CMTime: strings.Join(cliArgv, " ")}
	base, err := qps(cfg.Device)
	if err != nil {
		return run, err
	}
	srv, err := command.Start(command.Spec{Argv: srvArgv})
	if err != nil {
		return run, fmt.Errorf("cmtime server: %w", err)
	}
	// cmtime's server serves until it is ended: by its PID, reaped.
	defer srv.Stop(2 * time.Second)
	if err := command.WaitReady(ctx, srv, command.Readiness{Port: cfg.Port, Timeout: 30 * time.Second,
		Listening: func(p int) bool { ok, _ := collectors.CMListening(ctx, p); return ok }}); err != nil {
		return run, fmt.Errorf("cmtime server: %w", err)
	}
	add := func(m bench.CMMeasurement) {
		run.Measurements = append(run.Measurements, m)
		run.Summarise()
		if progress != nil {
			progress(m)
		}
	}
	for pass := 1; pass <= cfg.Passes; pass++ {
		m := cmtimeClient(ctx, cliArgv, cfg.N, cfg.Timeout)
		m.Pass = pass
		if err := settle(ctx, cfg.Device, base, &m); err != nil {
			add(m)
			return run, err
		}
		add(m)
		for _, mode := range cfg.Modes {
			m := generator(ctx, cfg, mode)
			m.Pass = pass
			if err := settle(ctx, cfg.Device, base, &m); err != nil {
				add(m)
				return run, err
			}
			add(m)
		}
		if srv.Exited() {
			return run, fmt.Errorf("cmtime server %s: %s", srv.Exit(), command.LastLines(srv.Tail(), 3))
		}
	}
	return run, ctx.Err()
}

// cmtimeClient runs cmtime's client once and reads its step table.
func cmtimeClient(ctx context.Context, argv []string, n int, timeout time.Duration) bench.CMMeasurement {
	m := bench.CMMeasurement{Client: bench.CMTimeClient, Attempted: n}
	p, err := command.Start(command.Spec{Argv: argv, TailBytes: 16 << 10})
	if err != nil {
		m.Error = err.Error()
		return m
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	exit, werr := p.Wait(wctx)
	cancel()
	m.Output = p.Tail()
	switch {
	case werr != nil:
		m.Error = fmt.Sprintf("cmtime client: %v after %v: %s", werr, timeout, command.LastLines(p.Tail(), 3))
		return m
	case exit.Code != 0 || exit.Signal != "":
		// cmtime exits at the first connection that fails.
		m.Error = fmt.Sprintf("cmtime client %s: %s", exit, command.LastLines(p.Tail(), 3))
		return m
	}
	steps, err := bench.ParseCMTime(p.Tail())
	if err != nil {
		m.Error = err.Error()
		return m
	}
	m.CMTimeSteps = steps
	m.Connected = n
	m.Sec = bench.CMTimeConnectSec(steps)
	if m.Sec > 0 {
		m.PerSec = float64(n) / m.Sec
	}
	m.StepsMS = map[string]float64{}
	for _, s := range steps {
		m.StepsMS[s.Name] = s.TotalMS
	}
	return m
}

// generator makes N connections with client/rdmacm, all started
// together, and closes them.
func generator(ctx context.Context, cfg Config, mode string) bench.CMMeasurement {
	m := bench.CMMeasurement{Client: bench.RDMAProbeClient, Mode: mode, Attempted: cfg.N}
	cm, err := openCM()
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer cm.Close()
	recs, conns, err := rdmacm.Run(ctx, cm, rdmacm.Config{Addr: net.JoinHostPort(cfg.Addr, strconv.Itoa(cfg.Port)),
		N: cfg.N, InFlight: cfg.N, Timeout: cfg.Timeout, Lockstep: mode == bench.CMLockstep})
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer conns.Close()
	return measure(m, recs)
}

// openCM opens each turn's event channel; tests replace it.
var openCM = verbs.OpenCM

// measure reads a turn of rdmaprobe's generator from its records.
func measure(m bench.CMMeasurement, recs []result.ClientRecord) bench.CMMeasurement {
	var longest int64
	steps := map[string][]float64{}
	m.Outcomes = map[string]int{}
	for _, r := range recs {
		m.Outcomes[r.Outcome]++
		if r.Outcome != result.OutcomeOK {
			if m.Error == "" {
				m.Error = fmt.Sprintf("%s: %s", r.Outcome, r.Error)
			}
			continue
		}
		m.Connected++
		// All started together: the longest attempt runs from the first
		// rdma_create_id to the last ESTABLISHED.
		longest = max(longest, r.ConnectUS)
		for k, us := range r.PhasesUS {
			steps[k] = append(steps[k], float64(us)/1e3)
		}
	}
	m.Sec = float64(longest) / 1e6
	if m.Sec > 0 {
		m.PerSec = float64(m.Connected) / m.Sec
	}
	m.StepsMS = map[string]float64{}
	m.PerConnMS = map[string]bench.CMSpread{}
	for k, v := range steps {
		p := analysis.Percentiles(v)
		m.StepsMS[k] = p.P50
		m.PerConnMS[k] = bench.CMSpread{Min: slices.Min(v), P50: p.P50, Max: slices.Max(v)}
	}
	return m
}

// settle waits until the device holds no more QPs than before the run:
// the server has torn down the last turn's connections, so the next turn
// does not pay for them.
func settle(ctx context.Context, device string, base int, m *bench.CMMeasurement) error {
	start := time.Now()
	for {
		n, err := qps(device)
		if err != nil {
			return err
		}
		if n <= base {
			m.SettleSec = time.Since(start).Seconds()
			return nil
		}
		if time.Since(start) > settleTimeout {
			return fmt.Errorf("the device still held %d QPs (%d before the run) %v after %s's turn: the server did not free them",
				n, base, settleTimeout, m.Client)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func qps(device string) (int, error) {
	r, err := collectors.DeviceResources(device)
	if err != nil {
		return 0, err
	}
	return r["qp"], nil
}
