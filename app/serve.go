package app

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/server"
)

func serveCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the secure verbs server for --max-clients clients until SIGTERM",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:4433", Usage: "TCP address of the TLS exchange"},
			&cli.IntFlag{Name: "max-clients", Required: true, Usage: "clients admitted at once; client N+1 is refused as at capacity"},
			&cli.StringFlag{Name: "mode", Value: server.ModePerClient, Usage: "resources per client: per-client (1 QP + 2 CQ + 2 MR), shared-cq (1 QP + 2 MR), pool (1 QP; one registered pool) or srq (1 QP without RQ; pool + shared receive queue)"},
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
			&cli.BoolFlag{Name: "events", Hidden: true, Usage: "write JSON events on stdout for the runner"},
		}, append(append(limitFlags(), profileFlag()), fabricFlags()...)...),
		Action: func(c *cli.Context) error {
			if err := applyLimits(c); err != nil {
				return err
			}
			stopProfile, err := startProfile(c)
			if err != nil {
				return err
			}
			defer stopProfile()
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return serve(ctx, c, s)
		},
	}
}

// detachFlag is --detach of serve, search and ramp.
func detachFlag() cli.Flag {
	return &cli.BoolFlag{Name: "detach", Usage: "close each client's TLS connection once it is accepted, so the server holds no socket per client; clients leave with a goodbye message over their QP (default: the connection lives as long as the client, and its end releases the client)"}
}

func serve(ctx context.Context, c *cli.Context, s Streams) error {
	emit := runner.NewEmitter(s.Out)
	events := c.Bool("events")
	pair, err := serverPair(c)
	if err != nil {
		return err
	}
	clientCA, err := clientCAs(c)
	if err != nil {
		return err
	}
	tlsConf, err := pair.Server(clientCA)
	if err != nil {
		return err
	}
	tlsConf.SessionTicketsDisabled = !c.Bool("tls-tickets")
	if err := certs.SetKeyExchange(tlsConf, c.String("tls-kex")); err != nil {
		return err
	}
	p, err := provider(c)
	if err != nil {
		return err
	}
	scfg := server.Config{
		Listen: c.String("listen"), MaxClients: c.Int("max-clients"), Mode: c.String("mode"),
		TLS: tlsConf, Provider: p, Device: deviceConfig(c), MsgSize: c.Int("msg-size"),
		Backlog: c.Int("backlog"), HandshakeTimeout: c.Duration("handshake-timeout"),
		ExchangeTimeout: c.Duration("exchange-timeout"), Detach: c.Bool("detach"),
	}
	if u, ok := p.(interface{ InUse() map[string]int }); ok {
		scfg.InUse = u.InUse
	}
	srv, err := server.New(ctx, scfg)
	if err != nil {
		if events {
			emit.Emit(runner.Event{Event: "error", Error: err.Error()})
		}
		return err
	}
	dev := srv.Device()
	info := &result.DeviceInfo{Name: dev.Name(), Caps: dev.Caps(), Port: dev.Port()}
	addr := srv.Addr().String()
	if f := c.String("ready-file"); f != "" {
		if err := result.WriteFileAtomic(f, []byte(addr+"\n"), 0o644); err != nil {
			return err
		}
	}
	if events {
		emit.Emit(runner.Event{Event: "ready", Addr: addr, PID: os.Getpid(), Device: info})
	} else {
		sim := ""
		if p.Simulated() {
			sim = " (simulated fabric)"
		}
		detached := ""
		if c.Bool("detach") {
			detached = ", detached (clients leave with a goodbye over their QP)"
		}
		fmt.Fprintf(s.Out, "ready: listening on %s, device %s%s, max %d clients, mode %s%s\n",
			addr, dev.Name(), sim, c.Int("max-clients"), c.String("mode"), detached)
	}
	err = srv.Serve(ctx)
	st := srv.Stats()
	if events {
		emit.Emit(runner.Event{Event: "stats", Server: &st})
	} else {
		goodbyes := ""
		if st.Detached {
			goodbyes = fmt.Sprintf(" (%d on their goodbye)", st.Goodbyes)
		}
		fmt.Fprintf(s.Out, "stopped: %d accepted, %d connected, %d refused at capacity, peak %d, %d released%s%s\n",
			st.Accepted, st.Connected, st.Refused, st.PeakActive, st.Released, goodbyes, failureList(st.Failures))
	}
	return err
}

// failureList is "; failures: tls 2, exchange 1" (classes sorted), or
// nothing when there were none.
func failureList(f map[string]int) string {
	if len(f) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, f[k]))
	}
	return "; failures: " + strings.Join(parts, ", ")
}

func serverPair(c *cli.Context) (certs.Pair, error) {
	cert, key := c.String("cert"), c.String("key")
	if (cert == "") != (key == "") {
		return certs.Pair{}, fmt.Errorf("--cert and --key go together")
	}
	if cert != "" {
		return certs.Load(cert, key)
	}
	pair, err := certs.SelfSigned()
	if err != nil {
		return pair, err
	}
	if out := c.String("cert-out"); out != "" {
		if err := result.WriteFileAtomic(out, pair.CertPEM, 0o644); err != nil {
			return pair, err
		}
	}
	return pair, nil
}

// clientCAs returns the PEM of the client certificates the server
// authorises: --client-ca, or a client pair generated now and written to
// --client-cert-out/--client-key-out for the clients to present.
func clientCAs(c *cli.Context) ([]byte, error) {
	certOut, keyOut := c.String("client-cert-out"), c.String("client-key-out")
	if f := c.String("client-ca"); f != "" {
		if certOut != "" || keyOut != "" {
			return nil, fmt.Errorf("--client-cert-out/--client-key-out write a generated client pair; with --client-ca none is generated")
		}
		return os.ReadFile(f)
	}
	if (certOut == "") != (keyOut == "") {
		return nil, fmt.Errorf("--client-cert-out and --client-key-out go together")
	}
	pair, err := certs.SelfSignedClient()
	if err != nil {
		return nil, err
	}
	if keyOut != "" {
		if err := result.WriteFileAtomic(keyOut, pair.KeyPEM, 0o600); err != nil {
			return nil, err
		}
		if err := result.WriteFileAtomic(certOut, pair.CertPEM, 0o644); err != nil {
			return nil, err
		}
	}
	return pair.CertPEM, nil
}
