package app

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/result"
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
		&cli.StringFlag{Name: "slo", Value: "errors=0", Usage: "the traffic phase's objectives, comma-separated: p50|p90|p99|p99.9|max|mean<=DURATION, errors=0 or errors<=N, rate|client-rate|mbps>=X, >=F*base (the run's smallest N) or >=F*peak (the best N up to this one); one that rewards failure (errors>0, p99>=2ms) is refused; e.g. p99<=2ms,errors=0"},
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

// checkOff refuses a negative duration of the flags that take 0 for
// off, which their specs read as off too (offIfZero): the rest of the
// options' rules are their specs' (runner.Spec.Check).
func checkOff(c *cli.Context) error {
	for _, name := range []string{"calibrate", "sample-interval"} {
		if c.Duration(name) < 0 {
			return fail(ExitUsage, "--%s %v: want 0 (off) or more", name, c.Duration(name))
		}
	}
	return nil
}
