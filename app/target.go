package app

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// targetFlags probe a server, or clients, that rdmaprobe did not write.
func targetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "server-cmd", Usage: "probe this server instead of rdmaprobe's own: a command line split like a shell's words but run without one (write sh -c '…' for a shell), with {n} {max} {port} {dir} {device} {addr} {build}"},
		&cli.IntFlag{Name: "server-port", Usage: "the server command's fixed port ({port}); the next point waits until it is free again (default: a free port per point)"},
		&cli.StringFlag{Name: "server-build", Usage: "build command run on this host once per distinct client count before its first point ({n} {max} {build}: its output directory), cached by N and by the content of the files and directories it names"},
		&cli.StringFlag{Name: "server-build-cache", Usage: "directory of --server-build's cached outputs (default: ~/.cache/rdmaprobe/builds)"},
		&cli.StringFlag{Name: "server-ready", Usage: "regexp on the server's output that says it is ready (default: its port listening, TCP or rdma_cm)"},
		&cli.DurationFlag{Name: "server-stop-grace", Value: 10 * time.Second, Usage: "time the server command has between SIGTERM and SIGKILL"},
		&cli.DurationFlag{Name: "server-start-timeout", Value: 60 * time.Second, Usage: "time the server command has to become ready"},
		&cli.StringFlag{Name: "server-addr", Usage: "address clients dial: where rdmaprobe's own server listens, IP[:port] (default 127.0.0.1; with --hosts over SSH, this host's address as the first host sees it), or a --server-cmd's ({addr}; default 127.0.0.1, on the vm backend the guest's netdev address 192.0.2.1)"},
		&cli.StringSliceFlag{Name: "target-dir", Usage: "vm: a directory the commands need (certificates, configs), copied into the guest at the same path; repeatable"},
		&cli.StringFlag{Name: "client-cmd", Usage: "run this command once per client instead of the built-in client, with {i} {n} {addr} {port} {dir} {device} {build}"},
		&cli.StringFlag{Name: "client-kind", Usage: "the clients: builtin (rdmaprobe's own TLS clients, the default), rdmacm (rdma_cm RC connections to a --server-cmd, thousands per generator process from one event channel, each step timed; a traffic phase only with --cm-server-echoes) or command (--client-cmd's, implied by it)"},
		&cli.StringFlag{Name: "cm-private-data", Usage: "with --client-kind rdmacm: the private data every connect request carries, as hex or @file (at most 56 bytes)"},
		&cli.StringFlag{Name: "cm-steps", Value: protocol.CMStepsAuto, Usage: "with --client-kind rdmacm: how each generator steps its connections: lockstep (every address resolved, then every route, every QP, every connect, in batches of --inflight, as cmtime does), interleaved (each moves on as its own events come) or auto (lockstep when --inflight covers a generator's clients and no --connect-rate paces them, as measured faster by `rdmaprobe bench rdmacm`; interleaved otherwise)"},
		&cli.BoolFlag{Name: "cm-server-echoes", Usage: "with --client-kind rdmacm: the server posts receives and sends every message back as it came, so the rdma_cm clients run the traffic phase by the built-in clients' engine (SENDs of --msg-size, each echo verified; --depth, --msg-rate's open loop and --busy-poll as for them); without it they run none, since a SEND to a server that posts no receive is RNR-NAKed"},
		&cli.StringFlag{Name: "client-stdin", Usage: "text written to each client command's stdin, with printf escapes (e.g. 'send Test\\nquit\\n')"},
		&cli.StringFlag{Name: "client-ok", Usage: "regexp on a client command's output that says it connected (without it, exit status 0 alone)"},
		&cli.StringFlag{Name: "client-count", Usage: "how client commands make \"N at once\": held (stdin kept open until every client printed its --client-ok line; the default with --client-ok) or launched (N started together, each does its work and exits)"},
	}
}

// targetSpec reads the target flags into spec's Server and Client.
func targetSpec(c *cli.Context, spec *runner.Spec) error {
	if s := c.String("server-cmd"); s != "" {
		argv, err := command.SplitProgram("--server-cmd", s)
		if err != nil {
			return err
		}
		srv := &protocol.ServerCommand{Argv: argv, Port: c.Int("server-port"), Ready: c.String("server-ready"),
			Addr: c.String("server-addr"), StopGrace: c.Duration("server-stop-grace"), StartTimeout: c.Duration("server-start-timeout")}
		if b := c.String("server-build"); b != "" {
			if srv.Build, err = command.Split(b); err != nil {
				return fmt.Errorf("--server-build: %w", err)
			}
		}
		spec.Server = srv
	} else {
		for _, f := range []string{"server-port", "server-build", "server-build-cache", "server-ready"} {
			if c.IsSet(f) {
				return fmt.Errorf("--%s goes with --server-cmd", f)
			}
		}
	}
	if s := c.String("client-cmd"); s != "" {
		argv, err := command.SplitProgram("--client-cmd", s)
		if err != nil {
			return err
		}
		stdin, err := command.Unescape(c.String("client-stdin"))
		if err != nil {
			return fmt.Errorf("--client-stdin: %w", err)
		}
		cl := &protocol.ClientCommand{Argv: argv, Stdin: stdin, OK: c.String("client-ok")}
		switch c.String("client-count") {
		case "":
			cl.Held = cl.OK != ""
		case "held":
			cl.Held = true
		case "launched":
		default:
			return fmt.Errorf("--client-count %q: want held or launched", c.String("client-count"))
		}
		spec.Client = cl
	} else {
		for _, f := range []string{"client-stdin", "client-ok", "client-count"} {
			if c.IsSet(f) {
				return fmt.Errorf("--%s goes with --client-cmd", f)
			}
		}
	}
	if err := clientKind(c, spec); err != nil {
		return err
	}
	if len(c.StringSlice("target-dir")) > 0 && spec.Server == nil && spec.Client == nil {
		return fmt.Errorf("--target-dir goes with --server-cmd or --client-cmd")
	}
	return nil
}

// clientKind reads --client-kind and --cm-private-data into spec.
func clientKind(c *cli.Context, spec *runner.Spec) error {
	kind := c.String("client-kind")
	switch kind {
	case "", "builtin", "command":
		if kind == "command" && spec.Client == nil {
			return fmt.Errorf("--client-kind command needs --client-cmd")
		}
		if kind == "builtin" && spec.Client != nil {
			return fmt.Errorf("--client-kind builtin and --client-cmd: the clients are one or the other")
		}
		for _, f := range []string{"cm-private-data", "cm-server-echoes", "cm-steps"} {
			if c.IsSet(f) {
				return fmt.Errorf("--%s goes with --client-kind rdmacm", f)
			}
		}
		return nil
	case result.ClientRDMACM:
	default:
		return fmt.Errorf("--client-kind %q: want builtin, rdmacm or command", kind)
	}
	pd, err := privateData(c.String("cm-private-data"))
	if err != nil {
		return fmt.Errorf("--cm-private-data: %w", err)
	}
	steps := c.String("cm-steps")
	switch steps {
	case protocol.CMStepsAuto:
		steps = ""
	case protocol.CMStepsLockstep, protocol.CMStepsInterleaved:
	default:
		return fmt.Errorf("--cm-steps %q: want auto, lockstep or interleaved", steps)
	}
	spec.CM = &protocol.CMClient{PrivateData: pd, ServerEchoes: c.Bool("cm-server-echoes"), Steps: steps}
	if !spec.CM.ServerEchoes {
		// Servers such as cmtime's post no receives: a SEND would be
		// RNR-NAKed, so rdma_cm clients run no traffic phase unless
		// the operator says the server echoes.
		spec.Traffic = client.TrafficConfig{}
	}
	return nil
}

// privateData reads hex, or @file's bytes; rdmacm.Refuse bounds their
// length.
func privateData(s string) ([]byte, error) {
	var b []byte
	if name, ok := strings.CutPrefix(s, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return nil, err
		}
	} else {
		var err error
		if b, err = hex.DecodeString(strings.TrimPrefix(s, "0x")); err != nil {
			return nil, fmt.Errorf("%q: want hex digits or @file", s)
		}
	}
	return b, nil
}
