package app

import (
	"bufio"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/runner/child"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

func clientsCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:   "clients",
		Usage:  "load generator: run N concurrent clients against a server (used by search and ramp)",
		Hidden: true,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:4433", Usage: "server address"},
			&cli.IntFlag{Name: "n", Value: 1, Usage: "clients in this process"},
			&cli.IntFlag{Name: "id-base", Usage: "ID of the first client"},
			&cli.IntFlag{Name: "proc", Usage: "index of this process"},
			&cli.Float64Flag{Name: "connect-rate", Usage: "client launches per second (0 = all at once)"},
			&cli.BoolFlag{Name: "tls-resume", Usage: "resume TLS sessions between this process's clients (PSK with ECDHE: forward-secret, the client certificate travels in the ticket); the first client connects alone with a full handshake, the others resume its session"},
			tlsKexFlag(),
			&cli.IntFlag{Name: "inflight", Value: protocol.DefaultInFlight, Usage: "connection attempts in progress at once (0 = unbounded burst)"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "per-client deadline"},
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "verified round trips per client"},
			&cli.IntFlag{Name: "msg-size", Value: 4096, Usage: "payload bytes per message"},
			muxFlag(),
			&cli.BoolFlag{Name: "ud", Usage: "UD QPs, for a server of --mode ud: each message one datagram, a lost one counted"},
			&cli.StringFlag{Name: "ca", Usage: "server certificate PEM to pin (required without --spec)"},
			&cli.StringFlag{Name: "cert", Usage: "client certificate PEM presented to the server (mutual TLS; required without --spec)"},
			&cli.StringFlag{Name: "key", Usage: "client key PEM (required without --spec)"},
			&cli.DurationFlag{Name: "hold", Usage: "keep connected clients open this long before exiting"},
			&cli.BoolFlag{Name: "hold-stdin", Usage: "keep connected clients open until stdin ends (how a probe with --client-cmd holds them)"},
			&cli.DurationFlag{Name: "traffic", Usage: "traffic phase once the clients are connected, at least this long (0 = none)"},
			&cli.DurationFlag{Name: "traffic-max", Value: client.DefaultMaxDuration, Usage: "the phase extends past --traffic until every client completed a message in it, for at most this long"},
			&cli.StringFlag{Name: "op", Value: "send", Usage: "traffic operation: send, write or read (the server needs --remote)"},
			&cli.IntFlag{Name: "depth", Value: 1, Usage: "messages each client keeps outstanding"},
			&cli.Float64Flag{Name: "msg-rate", Usage: "messages/s each client is due (open loop); 0 = closed loop"},
			&cli.DurationFlag{Name: "msg-timeout", Value: client.DefaultMsgTimeout, Usage: "a message outstanding this long fails its client"},
			specFlag(),
		}, append(fabricFlags(), profileFlag())...),
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			in := bufio.NewReader(s.In)
			spec, events, err := generatorSpec(c, in)
			if err != nil {
				return err
			}
			return child.Generate(ctx, spec, in, s.Out, events)
		},
	}
}

// generatorSpec is the --spec the runner sent, or what the flags say.
func generatorSpec(c *cli.Context, in *bufio.Reader) (protocol.GeneratorSpec, bool, error) {
	var spec protocol.GeneratorSpec
	if c.IsSet("spec") {
		return spec, true, readSpec(c, in, &spec)
	}
	for _, f := range []string{"ca", "cert", "key"} {
		if c.String(f) == "" {
			return spec, false, fail(ExitUsage, "clients: --%s is required (or --spec)", f)
		}
	}
	var err error
	read := func(flag string) []byte {
		b, e := os.ReadFile(c.String(flag))
		if e != nil && err == nil {
			err = e
		}
		return b
	}
	spec = protocol.GeneratorSpec{N: c.Int("n"), IDBase: c.Int("id-base"), Proc: c.Int("proc"), Addr: c.String("addr"),
		Rate: c.Float64("connect-rate"), Fabric: fabricSpec(c, c.String("backend")),
		CA: read("ca"), Cert: read("cert"), Key: read("key"), TLSResume: c.Bool("tls-resume"), TLSKex: c.String("tls-kex"),
		InFlight: c.Int("inflight"), Timeout: c.Duration("timeout"), Rounds: c.Int("rounds"), MsgSize: c.Int("msg-size"), UD: c.Bool("ud"),
		Mux: c.Int("mux"), CPUProfile: c.String("cpuprofile"), Hold: c.Duration("hold"), HoldStdin: c.Bool("hold-stdin"), Traffic: trafficConfig(c)}
	if cerr := spec.Check(); cerr != nil {
		return spec, false, fail(ExitUsage, "clients: %v", cerr)
	}
	return spec, false, err
}
