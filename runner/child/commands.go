package child

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// commandTailBytes is the output kept per failed client: enough for its
// last lines, small enough for thousands of them in one run file.
const commandTailBytes = 512

// generateCommands is Generate for protocol.ClientCommand clients: it says
// "ready" at once (it has no device to open), waits for the release
// (the server's host:port), launches spec.N clients paced by Rate and
// bounded by InFlight (a client is in flight until its ok line or its
// end), reports "progress" and "done", and after the runner closes its
// stdin releases held clients and reaps every process.
func generateCommands(ctx context.Context, spec protocol.GeneratorSpec, in *bufio.Reader, out io.Writer, events bool) error {
	emit := protocol.NewEmitter(out)
	cc := spec.Command
	failf := func(err error) error {
		if events {
			emit.Emit(protocol.Event{Event: "error", Error: err.Error()})
		}
		return err
	}
	if err := cc.Check(spec.Build != ""); err != nil {
		return failf(err)
	}
	var ok *regexp.Regexp
	if cc.OK != "" {
		ok = regexp.MustCompile(cc.OK)
	}
	addr := spec.Addr
	if events {
		emit.Emit(protocol.Event{Event: "ready"})
		line, err := in.ReadString('\n')
		if err != nil {
			return nil // released before the start: the point was abandoned
		}
		addr = strings.TrimSpace(line)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return failf(fmt.Errorf("server address %q: %w", addr, err))
	}
	vars := map[string]string{"n": strconv.Itoa(spec.Total), "addr": host, "port": port,
		"dir": spec.Dir, "device": spec.Fabric.Device}
	if spec.Build != "" {
		vars["build"] = spec.Build
	}

	var done, connected atomic.Int64
	stopProgress := reportProgress(emit, events, &done, &connected, nil)

	recs := make([]result.ClientRecord, spec.N)
	procs := make([]*command.Proc, spec.N)
	var window chan struct{}
	if spec.InFlight > 0 {
		window = make(chan struct{}, spec.InFlight)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < spec.N; i++ {
		client.Pace(ctx, start, i, spec.Rate)
		if window != nil {
			window <- struct{}{}
		}
		id := spec.IDBase + i
		v := map[string]string{"i": strconv.Itoa(id)}
		for k, x := range vars {
			v[k] = x
		}
		wg.Add(1)
		go func(i, id int) {
			defer wg.Done()
			release := func() {
				if window != nil {
					<-window
				}
			}
			rec, p := runClientCommand(ctx, cc, ok, v, spec.Timeout)
			rec.ID, rec.Proc = id, spec.Proc
			recs[i], procs[i] = rec, p
			release()
			if rec.Outcome == result.OutcomeOK {
				connected.Add(1)
			}
			done.Add(1)
		}(i, id)
	}
	wg.Wait()
	stopProgress()

	if events {
		emit.Emit(protocol.Event{Event: "done", OK: int(connected.Load()), Records: recs})
		released := make(chan struct{})
		go func() {
			io.Copy(io.Discard, in)
			close(released)
		}()
		select {
		case <-released:
		case <-ctx.Done():
		}
	} else {
		printCounts(out, recs, int(connected.Load()))
	}
	// Release the held clients together: end of stdin, then SIGTERM for
	// those that do not leave on it (rping reads no stdin), then SIGKILL;
	// every process of every client is reaped.
	for _, p := range procs {
		if p != nil {
			p.CloseStdin()
		}
	}
	var leave sync.WaitGroup
	for _, p := range procs {
		if p == nil {
			continue
		}
		leave.Add(1)
		go func(p *command.Proc) {
			defer leave.Done()
			t := time.NewTimer(releaseGrace)
			select {
			case <-p.Done():
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			p.Stop(releaseGrace)
		}(p)
	}
	leave.Wait()
	return nil
}

// releaseGrace is how long a released client has to leave on the end of
// its stdin, and then on SIGTERM.
const releaseGrace = 2 * time.Second

// runClientCommand runs one client until its outcome is known: its ok
// line when held (the process then stays, returned for the release), or
// its exit. The deadline ends it as a timeout.
func runClientCommand(ctx context.Context, cc *protocol.ClientCommand, ok *regexp.Regexp, vars map[string]string, timeout time.Duration) (result.ClientRecord, *command.Proc) {
	argv, err := command.Expand(cc.Argv, vars)
	if err != nil {
		return commandRecord(command.StartOutcome(&command.StartError{Err: err})), nil
	}
	p, err := command.Start(command.Spec{Argv: argv, Stdin: cc.Stdin, Hold: cc.Held, Match: ok, TailBytes: commandTailBytes,
		OnlyDevice: cc.OnlyDevice})
	if err != nil {
		return commandRecord(command.StartOutcome(err)), nil
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	matched := p.Matched()
	if !cc.Held {
		matched = nil // a launched client's outcome is its end
	}
	select {
	case <-matched:
		_, after, _ := p.Match()
		return commandRecord(command.Outcome{Class: command.OK, OKAfter: after, Duration: after}), p
	case <-p.Done():
		p.Stop(0) // the rest of its tree, and its output read to the end
		return commandRecord(command.Classify(p, nil, ok != nil)), p
	case <-dctx.Done():
		// The outcome is the deadline, now: a client stuck in the kernel
		// (uninterruptible in an rdma_cm call) may take long to die, and
		// its dying is not the point's business. It is reaped at the
		// release like every other.
		p.Kill()
		return commandRecord(command.TimedOut(p)), p
	}
}

// commandRecord is a client command's outcome as a record.
func commandRecord(o command.Outcome) result.ClientRecord {
	r := result.ClientRecord{Outcome: outcomeOf(o.Class), Errno: o.Errno,
		Command: &result.CommandRecord{ExitCode: o.ExitCode, Signal: o.Signal, HarnessLimit: o.HarnessLimit,
			DurationMS: float64(o.Duration.Microseconds()) / 1e3, Tail: o.Tail, OutputBytes: o.OutputBytes}}
	switch {
	case o.Class == command.OK && o.OKAfter > 0:
		r.ConnectUS = o.OKAfter.Microseconds()
	case o.Class == command.OK:
		r.ConnectUS = o.Duration.Microseconds()
	case o.Error != "":
		r.Error = o.Error
	case o.Class == command.Timeout:
		r.Error = fmt.Sprintf("no outcome before the deadline; killed after %.1f s", o.Duration.Seconds())
	default:
		// The error text that groups failures: how it ended and its last
		// line, e.g. "exit status 3: capclient: refused: server at
		// capacity (MAX_CLIENTS=3)".
		how := fmt.Sprintf("exit status %d", o.ExitCode)
		if o.Signal != "" {
			how = "killed by " + o.Signal
		} else if o.Class == command.Mismatch {
			how = "exit status 0 without the ok line"
		}
		if last := command.LastLines(o.Tail, 1); last != "" {
			how += ": " + last
		}
		r.Error = how
	}
	return r
}

func outcomeOf(c command.Class) string {
	switch c {
	case command.OK:
		return result.OutcomeOK
	case command.ExitStatus:
		return result.OutcomeExit
	case command.Signaled:
		return result.OutcomeSignal
	case command.Timeout:
		return result.OutcomeTimeout
	case command.Mismatch:
		return result.OutcomeMismatch
	}
	return result.OutcomeStart
}
