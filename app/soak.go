package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
	"github.com/rdmaprobe/rdmaprobe/soak"
)

func soakCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:  "soak",
		Usage: "run serve for a long time under waves of clients and print its memory and files per interval",
		UsageText: "rdmaprobe bench soak --soak-duration 1h --wave 300 --max-clients 2000\n\n" +
			"Starts `rdmaprobe serve` and, until --soak-duration has passed, connects a wave of clients,\n" +
			"runs --traffic of messages, and closes them. Every --interval it reads the server's RSS,\n" +
			"retained heap (serve --debug-addr), open files, threads and mappings, and at the end the\n" +
			"growth of RSS and heap per 100,000 clients served. Figures, not pass/fail.\n" +
			"--backend sim (the default) runs on this host, --backend vm inside the Soft-RoCE guest.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "backend", Value: "sim", Usage: "sim (this host), verbs (this host's RDMA device) or vm (both ends in the Soft-RoCE guest)"},
			&cli.DurationFlag{Name: "soak-duration", Value: 10 * time.Minute, Usage: "how long the waves go on"},
			&cli.DurationFlag{Name: "interval", Value: 30 * time.Second, Usage: "time between samples of the server"},
			&cli.IntFlag{Name: "wave", Value: 300, Usage: "clients per wave"},
			&cli.DurationFlag{Name: "traffic", Value: 3 * time.Second, Usage: "each wave's traffic phase before its clients leave"},
			&cli.IntFlag{Name: "max-clients", Value: 2000, Usage: "the server's --max-clients"},
			&cli.StringFlag{Name: "mode", Value: runner.DefaultMode, Usage: "the server's --mode"},
			&cli.IntFlag{Name: "msg-size", Value: 4096, Usage: "payload bytes per message"},
			&cli.IntFlag{Name: "inflight", Value: protocol.DefaultInFlight, Usage: "connection attempts in progress at once"},
			&cli.StringFlag{Name: "results", Value: "results", Usage: "directory that receives <UTC time>-soak-<backend>/" + soak.FileName},
		}, vmFlags()...),
		Action: interruptible(s, runSoak),
	}
}

func runSoak(ctx context.Context, c *cli.Context, s Streams) error {
	cfg := soak.Config{Duration: c.Duration("soak-duration"), Interval: c.Duration("interval"), Wave: c.Int("wave"),
		Traffic: c.Duration("traffic"), MaxClients: c.Int("max-clients"), Mode: c.String("mode"),
		MsgSize: c.Int("msg-size"), InFlight: c.Int("inflight")}
	if err := cfg.Check(); err != nil {
		return fail(ExitUsage, "bench soak: %v", err)
	}
	backend := c.String("backend")
	if backend != "sim" && backend != "verbs" && backend != "vm" {
		return fail(ExitUsage, "bench soak: --backend %q: want sim, verbs or vm", backend)
	}
	if backend == "verbs" && !protocol.HasVerbs() {
		return fmt.Errorf("--backend verbs: this binary was built without libibverbs; build it with `go build -tags verbs`")
	}
	dir, err := result.NewRunDir(c.String("results"), "soak-"+backend, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "soak: serve --mode %s --max-clients %d on %s, waves of %d clients with %v of traffic, for %v\n",
		cfg.Mode, cfg.MaxClients, backend, cfg.Wave, cfg.Traffic, cfg.Duration)
	soak.PrintHeader(s.Out)
	sample := func(x soak.Sample) { soak.PrintSample(s.Out, x) }
	var res *soak.Result
	if backend == "vm" {
		opts := guestOptions(c)
		opts.ConsoleLog = filepath.Join(dir, "guest-console.log")
		g, gerr := vm.BootGuest(ctx, opts)
		if gerr != nil {
			return gerr
		}
		defer g.Close()
		res, err = g.Soak(ctx, cfg, sample)
	} else {
		res, err = runner.Soak(ctx, protocol.Fabric{Backend: backend, GIDIndex: -1}, cfg, sample)
	}
	if res != nil {
		path, serr := soak.Save(dir, os.Args, backend, res)
		if serr != nil && err == nil {
			err = serr
		}
		fmt.Fprintf(s.Out, "served %d clients (%d failed); growth per 100,000 clients served: RSS %+.1f KiB, retained heap %+.1f KiB\nsaved %s\n",
			res.Served, res.Failures, res.RSSPer100k/1024, res.HeapPer100k/1024, path)
	}
	return err
}
