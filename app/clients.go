package app

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
)

func clientsCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:   "clients",
		Usage:  "load generator: run N concurrent clients against a server (used by search and ramp)",
		Hidden: true,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:4433", Usage: "server address (with --events, the first line of stdin instead)"},
			&cli.IntFlag{Name: "n", Value: 1, Usage: "clients in this process"},
			&cli.IntFlag{Name: "id-base", Usage: "ID of the first client"},
			&cli.IntFlag{Name: "proc", Usage: "index of this process"},
			&cli.Float64Flag{Name: "rate", Usage: "client launches per second (0 = all at once)"},
			&cli.BoolFlag{Name: "tls-resume", Usage: "resume TLS sessions between this process's clients (PSK with ECDHE: forward-secret, the client certificate travels in the ticket); the first client connects alone with a full handshake, the others resume its session"},
			tlsKexFlag(),
			&cli.IntFlag{Name: "inflight", Value: DefaultInFlight, Usage: "connection attempts in progress at once (0 = unbounded burst)"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "per-client deadline"},
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "verified round trips per client"},
			&cli.IntFlag{Name: "msg-size", Value: 4096, Usage: "payload bytes per message"},
			&cli.StringFlag{Name: "ca", Required: true, Usage: "server certificate PEM to pin"},
			&cli.StringFlag{Name: "cert", Required: true, Usage: "client certificate PEM presented to the server (mutual TLS)"},
			&cli.StringFlag{Name: "key", Required: true, Usage: "client key PEM"},
			&cli.DurationFlag{Name: "hold", Usage: "keep connected clients open this long before exiting (without --events)"},
			&cli.BoolFlag{Name: "events", Hidden: true, Usage: "JSON events on stdout; hold clients until stdin closes"},
		}, append(fabricFlags(), profileFlag())...),
		Action: func(c *cli.Context) error {
			raiseNoFile()
			stopProfile, err := startProfile(c)
			if err != nil {
				return err
			}
			defer stopProfile()
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runClients(ctx, c, s)
		},
	}
}

func runClients(ctx context.Context, c *cli.Context, s Streams) error {
	events := c.Bool("events")
	emit := runner.NewEmitter(s.Out)
	failf := func(err error) error {
		if events {
			emit.Emit(runner.Event{Event: "error", Error: err.Error()})
		}
		return err
	}
	if c.Int("n") < 1 {
		return failf(fmt.Errorf("--n must be at least 1"))
	}
	ca, err := os.ReadFile(c.String("ca"))
	if err != nil {
		return failf(err)
	}
	cpair, err := certs.Load(c.String("cert"), c.String("key"))
	if err != nil {
		return failf(err)
	}
	tlsConf, err := certs.Client(ca, cpair)
	if err != nil {
		return failf(err)
	}
	if err := certs.SetKeyExchange(tlsConf, c.String("tls-kex")); err != nil {
		return failf(err)
	}
	if c.Bool("tls-resume") {
		tlsConf.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	}
	p, err := provider(c)
	if err != nil {
		return failf(err)
	}
	dev, err := p.Open(ctx, deviceConfig(c))
	if err != nil {
		return failf(fmt.Errorf("open device: %w", err))
	}
	defer dev.Close()
	addr := c.String("addr")
	in := bufio.NewReader(s.In)
	if events {
		// Started, device open: the runner sends the server's address
		// when the server and every generator are ready, so the clients
		// of all generators start together and no start-up is timed.
		emit.Emit(runner.Event{Event: "ready"})
		line, err := in.ReadString('\n')
		if err != nil {
			return nil // released before the start: the point was abandoned
		}
		addr = strings.TrimSpace(line)
	}
	d, err := client.NewDialer(dev, client.Config{Addr: addr, TLS: tlsConf,
		Rounds: c.Int("rounds"), MsgSize: c.Int("msg-size"), Timeout: c.Duration("timeout")})
	if err != nil {
		return failf(err)
	}
	defer d.Close()

	var done, ok atomic.Int64
	tick := time.NewTicker(250 * time.Millisecond)
	stopTick := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		last := int64(-1)
		for {
			select {
			case <-tick.C:
				if n := done.Load(); events && n != last {
					last = n
					emit.Emit(runner.Event{Event: "progress", Done: int(n), OK: int(ok.Load())})
				}
			case <-stopTick:
				return
			}
		}
	}()
	recs, conns := client.Run(ctx, d, client.Load{N: c.Int("n"), IDBase: c.Int("id-base"),
		Proc: c.Int("proc"), Rate: c.Float64("rate"), InFlight: c.Int("inflight"), Lead: c.Bool("tls-resume")}, func(n, k int) {
		done.Store(int64(n))
		ok.Store(int64(k))
	})
	tick.Stop()
	close(stopTick)
	<-ticked

	if events {
		emit.Emit(runner.Event{Event: "done", OK: len(conns), Records: recs})
		// Hold every connected client until the runner releases them.
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
		counts := map[string]int{}
		for _, r := range recs {
			counts[r.Outcome]++
		}
		fmt.Fprintf(s.Out, "%d/%d clients connected", len(conns), len(recs))
		for _, o := range result.Outcomes {
			if o != result.OutcomeOK && counts[o] > 0 {
				fmt.Fprintf(s.Out, ", %s %d", o, counts[o])
			}
		}
		fmt.Fprintln(s.Out)
		if h := c.Duration("hold"); h > 0 {
			t := time.NewTimer(h)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
	client.CloseAll(conns)
	return nil
}

// DefaultInFlight is the default window of connection attempts in
// progress per load generator. A capacity probe asks how many clients
// the server holds at once, not how a 10,000-connection SYN burst fares:
// unbounded, such a burst overflows the listen queue and starves every
// handshake of CPU until all of them time out (measured: 10,000 clients
// in the Soft-RoCE guest, 1.4% connected). --inflight 0 restores it.
const DefaultInFlight = 256
