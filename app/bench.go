package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/report"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
)

// DefaultBenchPasses: three passes in turns. In the Soft-RoCE guest one
// pass of each gave c/(a+b) at 100 in flight of 1.22, 1.44 and 1.54 in
// three runs of the same code (serially 1.35-1.37): a few seconds per
// measurement, taken one after the other, catch the machine's slow
// spells unevenly.
const DefaultBenchPasses = 3

func benchCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure a full client connect against a bare TLS handshake and the raw verbs it needs",
		UsageText: "rdmaprobe bench --backend vm\n" +
			"rdmaprobe bench --backend sim --ops 1000 --concurrency 100\n\n" +
			"On one backend and in one process: (a) bare TLS 1.3 handshakes, (b) the raw verbs of one\n" +
			"connection (both ends: 2 CQ + 2 MR + RC QP + INIT/RTR/RTS each), (c) full rdmaprobe connects\n" +
			"(TCP, TLS, exchange, QPs, transitions, first verified round trip), serially and with\n" +
			"--concurrency in flight; prints c/(a+b) and each one's connections per second.",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "ops", Value: 500, Usage: "operations per measurement and pass"},
			&cli.IntFlag{Name: "passes", Value: DefaultBenchPasses, Usage: "times each measurement is taken, in turns with the others (a, b, c, a, b, c, ...), pooled"},
			&cli.IntFlag{Name: "concurrency", Value: 100, Usage: "operations in flight in the concurrent pass (1 = serial only)"},
			tlsKexFlag(),
			&cli.IntFlag{Name: "warmup", Value: 5, Usage: "untimed operations before each measurement"},
			&cli.IntFlag{Name: "msg-size", Value: 4096, Usage: "MR size and payload bytes"},
			&cli.DurationFlag{Name: "op-timeout", Value: 60 * time.Second, Usage: "deadline of each operation"},
			&cli.StringFlag{Name: "results", Value: "results", Usage: "directory that receives <UTC time>-bench-<backend>/" + bench.FileName},
		}, append(vmFlags(), fabricFlags()...)...),
		Subcommands: []*cli.Command{soakCommand(s), benchRDMACMCommand(s)},
		Action:      interruptible(s, runBench),
	}
}

func runBench(ctx context.Context, c *cli.Context, s Streams) error {
	req := vm.BenchRequest{N: c.Int("ops"), Concurrency: c.Int("concurrency"), Warmup: c.Int("warmup"), Passes: c.Int("passes"),
		MsgSize: c.Int("msg-size"), Timeout: c.Duration("op-timeout"), Kex: c.String("tls-kex")}
	if err := checkTLSKex(c); err != nil {
		return fail(ExitUsage, "--tls-kex: %v", err)
	}
	if err := req.Check(); err != nil {
		return fail(ExitUsage, "%v", err)
	}
	be, err := chooseBackend(c)
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}
	if be.Name == "verbs" && !protocol.HasVerbs() {
		return fmt.Errorf("--backend verbs: this binary was built without libibverbs; build it with `go build -tags verbs`")
	}
	screen.Println(s.Out, screen.Width(s.Out), fmt.Sprintf("backend: %s (%s)", be.Description, be.Reason))

	dir, err := result.NewRunDir(c.String("results"), "bench-"+be.Name, time.Now())
	if err != nil {
		return err
	}
	path := filepath.Join(dir, bench.FileName)
	run := bench.NewRun(Version, os.Args, be.Backend, bench.Config{N: req.N, Concurrency: req.Concurrency, Warmup: req.Warmup,
		Passes: req.Passes, PayloadBytes: req.MsgSize, Rounds: 1, TimeoutSec: req.Timeout.Seconds()})
	progress := func(m bench.Measurement) {
		run.Measurements = append(run.Measurements, m)
		fmt.Fprintf(s.Err, "  %-13s %s: %d/%d ok, %.1f conn/s, %.3f ms/conn\n",
			m.Name, report.InFlight(m.Concurrency), m.OK, m.Attempted, m.PerSec, m.CostMS)
		run.Save(path)
	}

	var got *bench.Run
	if be.guest != nil {
		got, err = benchInGuest(ctx, *be.guest, dir, req, run, progress)
	} else {
		got, err = benchHere(ctx, be, req, progress)
	}
	if got != nil {
		run.Measured, run.Config = got.Measured, got.Config
		if d := got.Measured.Device; d != nil && be.Name == "verbs" {
			run.Backend.Description = fmt.Sprintf("verbs: %s port %d (%s) on Linux %s",
				d.Name, d.Port.Port, d.Port.LinkLayer, runner.ShortRelease(got.Measured.Kernel))
		}
		if len(got.Measurements) >= len(run.Measurements) {
			run.Measurements = got.Measurements
		}
	}
	return finishBench(s, run, dir, path, report.PrintBench, err)
}

// finishBench ends a bench run that err ended (nil: it completed): it
// saves the run, prints it with print and renders its report from the
// saved contents, as `rdmaprobe report bench.json` would, so the report
// can be regenerated. It returns err, or the first error of its own.
func finishBench(s Streams, run *bench.Run, dir, path string, print func(io.Writer, *bench.Run, int) error, err error) error {
	err = run.Finish(path, err)
	width := screen.Width(s.Out)
	if perr := print(s.Out, run, width); perr != nil && err == nil {
		err = perr
	}
	screen.Println(s.Out, width, "saved "+path)
	files, rerr := report.WriteBench(run, dir, report.Formats)
	if rerr != nil {
		fmt.Fprintf(s.Err, "report: %v\n", rerr)
		if err == nil {
			err = rerr
		}
	}
	sayReports(s, files, "report.", "report")
	return err
}

// benchHere runs the suite in this process, on purpose: a child process
// would add its start-up to nothing being measured, but also hide
// nothing.
func benchHere(ctx context.Context, be *backend, req vm.BenchRequest, progress func(bench.Measurement)) (*bench.Run, error) {
	p, err := be.fabric.Provider()
	if err != nil {
		return nil, err
	}
	return bench.Suite(ctx, p, req.N, req.Concurrency, req.Options(be.fabric.DeviceConfig()), progress)
}

// benchInGuest boots the Soft-RoCE guest and runs the suite there.
func benchInGuest(ctx context.Context, opts vm.GuestOptions, dir string, req vm.BenchRequest,
	run *bench.Run, progress func(bench.Measurement)) (*bench.Run, error) {
	opts.ConsoleLog = filepath.Join(dir, "guest-console.log")
	g, err := vm.BootGuest(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	run.Backend.Description = g.Description()
	return g.Bench(ctx, req, progress)
}

// interruptible runs a measuring command's action with a context that
// SIGINT and SIGTERM end: an action that then fails exits as interrupted.
func interruptible(s Streams, run func(context.Context, *cli.Context, Streams) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err := run(ctx, c, s)
		if err != nil && ctx.Err() != nil {
			return fail(ExitInterrupted, "interrupted: %v", err)
		}
		return err
	}
}
