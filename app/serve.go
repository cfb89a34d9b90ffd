package app

import (
	"bufio"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/child"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

func serveCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the secure verbs server for --max-clients clients until SIGTERM",
		UsageText: "rdmaprobe serve --max-clients 500 --cert-out server.pem\n" +
			"rdmaprobe serve --backend verbs --listen 0.0.0.0:4433 --max-clients 2000 --mode srq --detach --client-cert-out client.pem --client-key-out client.key",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:4433", Usage: "TCP address of the TLS exchange"},
			&cli.IntFlag{Name: "max-clients", Usage: "clients admitted at once (required); client N+1 is refused as at capacity"},
			&cli.StringFlag{Name: "mode", Value: runner.DefaultMode, Usage: "resources per client: per-client (1 QP + 2 CQ + 2 MR), shared-cq (1 QP + 2 MR), pool (1 QP; one registered pool), srq (1 QP without RQ; pool + shared receive queue), ud (no QP: 1 address handle; one UD QP per group, pool) or mux (--mux logical clients per QP, each admitted on its own; 1 QP + 2 CQ + 2 MR per QP)"},
			muxFlag(),
			&cli.StringFlag{Name: "cert", Usage: "server certificate PEM (default: a self-signed one generated at start)"},
			&cli.StringFlag{Name: "key", Usage: "server key PEM"},
			&cli.StringFlag{Name: "cert-out", Usage: "write the generated certificate here for clients to pin"},
			&cli.StringFlag{Name: "client-ca", Usage: "PEM of the client certificates allowed to connect (mutual TLS; default: a client pair generated at start)"},
			&cli.StringFlag{Name: "client-cert-out", Usage: "write the generated client certificate here (without --client-ca)"},
			&cli.StringFlag{Name: "client-key-out", Usage: "write the generated client key here, mode 0600 (without --client-ca)"},
			&cli.IntFlag{Name: "msg-size", Value: 4096, Usage: "largest payload a client may send, bytes"},
			&cli.IntFlag{Name: "backlog", Usage: "listen queue length (default: the kernel's somaxconn)"},
			&cli.DurationFlag{Name: "handshake-timeout", Value: 60 * time.Second, Usage: "per-client deadline for the TLS handshake"},
			&cli.DurationFlag{Name: "exchange-timeout", Value: 60 * time.Second, Usage: "per-client deadline from the handshake to the client's hello"},
			tlsKexFlag(),
			detachFlag(),
			&cli.BoolFlag{Name: "tls-tickets", Usage: "issue TLS session tickets so that returning clients can resume (default: off, every client does a full handshake)"},
			&cli.StringFlag{Name: "ready-file", Usage: "write the listening address to this file once ready"},
			&cli.StringFlag{Name: "debug-addr", Usage: "serve the retained heap and the server's counters as JSON at /debug/memory, and Go's profiles at /debug/pprof/, on this address (e.g. 127.0.0.1:6060; port 0 picks one, printed at start)"},
			metricsAddrFlag("serve the admission counters and the RDMA objects held (Prometheus/OpenMetrics) at /metrics on this `HOST:PORT` (docs/metrics.md)"),
			&cli.IntFlag{Name: "depth", Value: 1, Usage: "messages a client may have outstanding (sizes each client's queues and echo buffers)"},
			&cli.DurationFlag{Name: "busy-poll", Usage: "keep polling an empty completion queue this long after its last completion before sleeping on its completion channel (0 = sleep at once)"},
			&cli.BoolFlag{Name: "remote", Usage: "lend each client depth × msg-size bytes of one buffer registered at start for RDMA WRITE and READ (its address and rkey are in the accept)"},
			specFlag(),
		}, append(append(limitFlags(), profileFlag()), fabricFlags()...)...),
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			var spec protocol.ServerSpec
			if c.IsSet("spec") {
				in := bufio.NewReader(s.In)
				if err := readSpec(c, in, &spec); err != nil {
					return err
				}
				if c.String("spec") != "-" {
					in = nil // stdin is not the runner's
				}
				return child.Serve(ctx, spec, in, s.Out, true)
			}
			spec, err := serverSpec(c)
			if err != nil {
				return err
			}
			return child.Serve(ctx, spec, nil, s.Out, false)
		},
	}
}

// detachFlag is --detach of serve, search and ramp.
func detachFlag() cli.Flag {
	return &cli.BoolFlag{Name: "detach", Usage: "close each client's TLS connection once it is accepted, so the server holds no socket per client; clients leave with a goodbye message over their QP (default: the connection lives as long as the client, and its end releases the client)"}
}

// serverSpec is what serve's flags ask for.
func serverSpec(c *cli.Context) (protocol.ServerSpec, error) {
	if !c.IsSet("max-clients") {
		return protocol.ServerSpec{}, fail(ExitUsage, "serve: --max-clients is required (rdmaprobe serve --help lists the flags)")
	}
	spec := protocol.ServerSpec{Listen: c.String("listen"), MaxClients: c.Int("max-clients"), Mode: c.String("mode"),
		Fabric:  fabricSpec(c, c.String("backend")),
		MsgSize: c.Int("msg-size"), Backlog: c.Int("backlog"), HandshakeTimeout: c.Duration("handshake-timeout"),
		ExchangeTimeout: c.Duration("exchange-timeout"), TLSKex: c.String("tls-kex"), Detach: c.Bool("detach"),
		TLSTickets: c.Bool("tls-tickets"), NoFile: c.Uint64("nofile"), MemLock: c.Uint64("memlock"),
		CPUProfile: c.String("cpuprofile"), ReadyFile: c.String("ready-file"), DebugAddr: c.String("debug-addr"), MetricsAddr: c.String("metrics-addr"),
		Depth: c.Int("depth"), Remote: c.Bool("remote"), BusyPoll: c.Duration("busy-poll"), Mux: c.Int("mux")}
	if err := spec.Check(); err != nil {
		return spec, fail(ExitUsage, "serve: %v", err)
	}
	pair, err := certs.ServerPair(c.String("cert"), c.String("key"), c.String("cert-out"))
	if err != nil {
		return spec, err
	}
	spec.Cert, spec.Key = pair.CertPEM, pair.KeyPEM
	if spec.ClientCA, err = certs.ClientCAs(c.String("client-ca"), c.String("client-cert-out"), c.String("client-key-out")); err != nil {
		return spec, err
	}
	return spec, nil
}

// readSpec reads --spec: inline JSON, or with "-" the first line of in.
func readSpec(c *cli.Context, in *bufio.Reader, v any) error {
	if src := c.String("spec"); src != "-" {
		in = bufio.NewReader(strings.NewReader(src + "\n"))
	}
	if err := protocol.ReadSpec(in, v); err != nil {
		return fmt.Errorf("%s: --spec: %w", c.Command.Name, err)
	}
	return nil
}

// muxFlag is --mux, of the server (serve, search, ramp) and of a load
// generator run by hand (clients).
func muxFlag() cli.Flag {
	return &cli.IntFlag{Name: "mux", Usage: fmt.Sprintf("with --mode mux: logical clients per QP; a generator opens the next QP when one carries this many, and the server refuses more on one (0 = %d)", runner.DefaultMux)}
}
