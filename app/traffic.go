package app

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/report"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/slo"
)

// DefaultDuration is each point's traffic phase unless --traffic says
// otherwise. Two seconds give a closed loop thousands of round trips per
// client on sim and hundreds on Soft-RoCE in the TCG guest (enough for a
// p99 of the point), while `make run`'s search of 300..600 stays under
// two minutes.
const DefaultDuration = 2 * time.Second

// trafficFlags are the traffic phase's flags of search and ramp.
func trafficFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "traffic", Value: DefaultDuration, Usage: "traffic phase of each point once all its clients are connected: every client exchanges verified messages with the server for at least this long (0 = off)"},
		&cli.DurationFlag{Name: "traffic-max", Value: client.DefaultMaxDuration, Usage: "the traffic phase's window extends past --traffic until every client has completed a message inside it, for at most this long; a client still without one is unmeasured and fails the point's SLOs (--traffic or less: a fixed window)"},
		&cli.StringFlag{Name: "op", Value: result.OpSend, Usage: "traffic operation: send (SEND/RECV echo of a self-checking payload), write (RDMA WRITE into the server's buffer, read back after the phase) or read (RDMA READ of what the server put there)"},
		&cli.IntFlag{Name: "depth", Value: 1, Usage: "messages each client keeps outstanding (closed loop), or at most has (open loop)"},
		&cli.Float64Flag{Name: "msg-rate", Usage: "messages/s each client is due (open loop, latency timed from when each was due); 0 = closed loop at --depth"},
		&cli.DurationFlag{Name: "busy-poll", Usage: "server and clients keep polling an empty completion queue this long after their last completion before sleeping on its completion channel: perftest's busy polling, for data-path latency, at the price of CPU (0 = sleep at once)"},
		&cli.DurationFlag{Name: "msg-timeout", Value: client.DefaultMsgTimeout, Usage: "a message outstanding this long fails its client as timeout (the peer stopped answering)"},
		&cli.StringFlag{Name: "slo", Value: "errors=0", Usage: "the traffic phase's objectives, comma-separated: p50|p90|p99|p99.9|max|mean<=DURATION, errors=0 or errors<=N, rate|client-rate|mbps>=X or >=F*base (base: the run's smallest N); one that rewards failure (errors>0, p99>=2ms) is refused; e.g. p99<=2ms,errors=0"},
		&cli.StringFlag{Name: "criterion", Value: result.CriterionConnect, Usage: "what a point must meet to pass: connect (its clients connect at --threshold) or traffic (and its traffic phase meets --slo): max connected or max sustainable"},
		&cli.StringFlag{Name: "require", Usage: "exit with status 3 unless `N` clients pass, and every smaller count tested, by the criterion: --criterion's, or the one named as N:connect or N:traffic (a CI gate; without it a run exits 0 whatever it measured); with several --mode designs, every design must pass it"},
	}
}

// trafficConfig is the traffic phase the flags ask for (Duration 0 =
// none).
func trafficConfig(c *cli.Context) client.TrafficConfig {
	return client.TrafficConfig{Duration: c.Duration("traffic"), MaxDuration: c.Duration("traffic-max"), Op: c.String("op"), Depth: c.Int("depth"),
		Rate: c.Float64("msg-rate"), Timeout: c.Duration("msg-timeout"), BusyPoll: c.Duration("busy-poll")}
}

// trafficLine is a point's traffic phase in one line, "" without one.
func trafficLine(pt result.Point) string {
	t := pt.Traffic
	if t == nil {
		return ""
	}
	mode := fmt.Sprintf("depth %d", t.Depth)
	if t.RatePerClient > 0 {
		mode = fmt.Sprintf("%g msg/s per client", t.RatePerClient)
	}
	window := fmt.Sprintf("%.1f s", t.DurationSec)
	if t.MinDurationSec > 0 && t.DurationSec > t.MinDurationSec+0.05 {
		window += fmt.Sprintf(" (extended from %g s)", t.MinDurationSec)
	}
	window += fmt.Sprintf(", unmeasured %d", t.Unmeasured)
	if n := t.UnmeasuredNames(); n != "" {
		window += " (" + n + ")"
	}
	s := fmt.Sprintf("        traffic: %s %d B, %s, %s: %.0f msg/s, %.2f MB/s, latency p50 %s p99 %s max %s, per client %s..%s msg/s",
		t.Op, t.MsgBytes, mode, window, t.MsgRate, t.MBps,
		usText(t.Latency.P50), usText(t.Latency.P99), usText(t.Latency.Max), report.ClientRate(t.PerClient.Min), report.ClientRate(t.PerClient.Max))
	if r := pt.LatencyReference; r != nil && r.Error == "" && r.Figures["t_typical"] > 0 && t.Latency.P50 > 0 {
		s += fmt.Sprintf("; p50 %.2f × %s's t_typical %s, read just before", t.Latency.P50/r.Figures["t_typical"], r.Tool, usText(r.Figures["t_typical"]))
	}
	if n := t.ErrorCount(); n > 0 {
		var parts []string
		for _, k := range t.ErrorClasses() {
			parts = append(parts, fmt.Sprintf("%s %d", k, t.Errors[k]))
		}
		s += "; errors: " + strings.Join(parts, ", ")
	}
	var failed []string
	for _, v := range t.SLO {
		if !v.Passed {
			failed = append(failed, v.Text)
		}
	}
	switch {
	case len(failed) > 0:
		s += "; SLO missed: " + strings.Join(failed, ", ")
	case len(t.SLO) > 0 && t.Error == "":
		s += "; SLO met"
	}
	if t.HarnessLimit != "" {
		s += "; harness limit: " + t.HarnessLimit
	}
	if t.Error != "" {
		s += "; phase error: " + t.Error
	}
	return s
}

// usText prints microseconds as slo.FormatLatency does.
func usText(us float64) string { return slo.FormatLatency(time.Duration(us * 1e3)) }

// checkRanges refuses the numeric flags whose values mean nothing: a
// message size no payload fits (the connect's round trips and the
// traffic phase send messages of --msg-size), a negative count, rate,
// interval or queue length, a rate that is not a number, no verified
// round trip per client, a deadline of 0, a depth or busy-poll out of
// range.
// Each applies to the commands that have the flag.
func checkRanges(c *cli.Context) error {
	has := func(name string) bool {
		for _, f := range c.Command.Flags {
			if slices.Contains(f.Names(), name) {
				return true
			}
		}
		return false
	}
	if has("msg-size") {
		if err := payload.CheckSize(c.Int("msg-size")); err != nil {
			return fail(ExitUsage, "--msg-size %v", err)
		}
	}
	for _, f := range []struct {
		name string
		min  int
	}{{"rounds", 1}, {"max-clients", 0}, {"inflight", 0}, {"backlog", 0}, {"wall-stop", 0}} {
		if has(f.name) && c.Int(f.name) < f.min {
			return fail(ExitUsage, "--%s %d: want %d or more", f.name, c.Int(f.name), f.min)
		}
	}
	if r := c.Float64("connect-rate"); has("connect-rate") && !(r >= 0 && !math.IsInf(r, 1)) {
		return fail(ExitUsage, "--connect-rate %g: want 0 (all at once) or more launches per second", r)
	}
	for _, name := range []string{"calibrate", "sample-interval", "duration", "max-duration"} {
		if has(name) && c.Duration(name) < 0 {
			return fail(ExitUsage, "--%s %v: want 0 (off) or more", name, c.Duration(name))
		}
	}
	for _, name := range []string{"timeout", "handshake-timeout", "exchange-timeout"} {
		if has(name) && c.Duration(name) <= 0 {
			return fail(ExitUsage, "--%s %v: want more than 0", name, c.Duration(name))
		}
	}
	if b := c.Duration("busy-poll"); has("busy-poll") && (b < 0 || b > time.Second) {
		return fail(ExitUsage, "--busy-poll %v: want 0 (off) to 1s", b)
	}
	if d := c.Int("depth"); has("depth") && (d < 1 || d > runner.MaxDepth) {
		return fail(ExitUsage, "--depth %d: want 1 to %d messages outstanding per client", d, runner.MaxDepth)
	}
	return nil
}
