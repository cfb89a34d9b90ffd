package child

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/client/rdmacm"
	"github.com/rdmaprobe/rdmaprobe/fabric/verbs"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// generateCM is Generate for rdma_cm clients (protocol.CMClient): it says
// "ready" at once (rdma_cm picks the device from the route), waits for
// the release (the server's host:port), makes spec.N connections from
// one event channel, reports "progress" and "done", runs the traffic
// phase when the runner asks (a server that echoes) in the client
// engine the connections are clients of, and holds the connections
// until the runner closes its stdin. By hand it prints the counts, runs
// the phase at once, and holds for spec.Hold or until stdin ends
// (HoldStdin).
func generateCM(ctx context.Context, spec protocol.GeneratorSpec, in *bufio.Reader, out io.Writer, events bool) error {
	emit := protocol.NewEmitter(out)
	failf := func(err error) error {
		if events {
			emit.Emit(protocol.Event{Event: "error", Error: err.Error()})
		}
		return err
	}
	cfg := rdmacm.Config{N: spec.N, IDBase: spec.IDBase, Proc: spec.Proc, InFlight: spec.InFlight,
		Rate: spec.Rate, Timeout: spec.Timeout, PrivateData: spec.CM.PrivateData,
		Lockstep: spec.CM.Lockstep(spec.N, spec.InFlight, spec.Rate),
		Engine:   client.Config{MsgSize: spec.MsgSize, Timeout: spec.Timeout, Depth: spec.Traffic.Depth, BusyPoll: spec.Traffic.BusyPoll}}
	if err := cfg.Check(); err != nil {
		return failf(err)
	}
	// The server is the runner's --server-cmd, or the operator's address.
	if err := rdmacm.Refuse(rdmacm.Use{ServerCmd: true, Lockstep: cfg.Lockstep, Rate: cfg.Rate, PrivateData: cfg.PrivateData,
		ServerEchoes: spec.CM.ServerEchoes || !events, Traffic: spec.Traffic}); err != nil {
		return failf(err)
	}
	cm, err := verbs.OpenCM()
	if err != nil {
		return failf(err)
	}
	defer cm.Close()
	if events {
		emit.Emit(protocol.Event{Event: "started", PID: os.Getpid()})
		emit.Emit(protocol.Event{Event: "ready", PID: os.Getpid()})
		line, err := in.ReadString('\n')
		if err != nil {
			return nil // released before the start: the point was abandoned
		}
		cfg.Addr = strings.TrimSpace(line)
	} else {
		cfg.Addr = spec.Addr
	}
	var done, ok atomic.Int64
	cfg.Progress = func(n, k int) {
		done.Store(int64(n))
		ok.Store(int64(k))
	}
	failed := &tally{}
	cfg.Ended = failed.add
	stopProgress := reportProgress(emit, events, &done, &ok, failed)
	recs, conns, err := rdmacm.Run(ctx, cm, cfg)
	stopProgress()
	if err != nil {
		return failf(err)
	}
	defer conns.Close()
	connected := 0
	for _, r := range recs {
		if r.Outcome == result.OutcomeOK {
			connected++
		}
	}
	if events {
		usage := selfUsage(spec.Proc, "", "")
		emit.Emit(protocol.Event{Event: "done", OK: connected, Records: recs, Usage: &usage})
		// Hold every connection until the runner releases them, running
		// the traffic phase when it asks.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// A held connection the server drops is reported as it comes;
		// the watch ends before the connections are closed.
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			conns.Watch(ctx, func(r result.ClientRecord) {
				emit.Emit(protocol.Event{Event: "dropped", Records: []result.ClientRecord{r}})
			})
		}()
		defer func() {
			cancel()
			<-watched
		}()
		lines := watchRunner(in, cancel)
		holdForRunner(ctx, spec.Traffic, emit, lines, conns.Traffic, nil)
		return nil
	}
	printCounts(out, recs, connected)
	if spec.Traffic.Duration > 0 && connected > 0 {
		printTraffic(out, conns.Traffic(ctx, spec.Traffic))
	}
	if spec.HoldStdin && connected < len(recs) {
		return fmt.Errorf("%d of %d clients did not connect", len(recs)-connected, len(recs))
	}
	holdStandalone(ctx, in, spec)
	return nil
}
