package app

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/report"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
)

// benchRDMACMCommand compares rdmaprobe's rdma_cm load generator with
// rdma-core's cmtime client. It runs on the vm backend only: the
// comparison needs both clients and cmtime's server in one place with
// one kernel, and the Soft-RoCE guest is that place on any machine. Each
// pass runs cmtime's client, then the generator in each --cm-modes, one
// after the other against one cmtime server (bench/cmbench).
func benchRDMACMCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:  "rdmacm",
		Usage: "compare connects/s of the rdma_cm load generator (--client-kind rdmacm) with rdma-core's cmtime client",
		UsageText: "rdmaprobe bench rdmacm --backend vm --connections 1000 --passes 3\n\n" +
			"In one Soft-RoCE guest, against one cmtime server (cmtime -b ADDR -p PORT -c N), in turns:\n" +
			"cmtime's client (cmtime -s ADDR -p PORT -c N), then rdmaprobe's generator in each of\n" +
			"--cm-modes, N connections each, all started together, --passes times. cmtime's connects/s\n" +
			"is N over the sum of its printed totals for create id, resolve addr, resolve route, create\n" +
			"qp and connect; rdmaprobe's is connections established over the time from the first\n" +
			"resolve to the last ESTABLISHED. Prints a table per pass and each mode's median ratio\n" +
			"(target ≥ 1.0).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "backend", Value: "vm", Usage: "vm only: the comparison runs inside the Soft-RoCE guest"},
			&cli.IntFlag{Name: "connections", Value: 1000, Usage: "connections per client and pass"},
			&cli.IntFlag{Name: "passes", Value: DefaultBenchPasses, Usage: "turns of every client (cmtime, rdmaprobe, cmtime, rdmaprobe, ...)"},
			&cli.StringFlag{Name: "cm-modes", Value: bench.CMInterleaved + "," + bench.CMLockstep, Usage: "how rdmaprobe's generator steps its connections, each measured in every pass: interleaved (each moves on as its events come) and/or lockstep (every step for all before the next, as cmtime)"},
			&cli.StringFlag{Name: "cmtime", Value: "cmtime", Usage: "the cmtime program (rdmacm-utils), carried into the guest"},
			&cli.IntFlag{Name: "cm-port", Value: 7471, Usage: "the port cmtime's server listens on in the guest"},
			&cli.DurationFlag{Name: "op-timeout", Value: 2 * time.Minute, Usage: "deadline of each client's N connections"},
			&cli.StringFlag{Name: "results", Value: "results", Usage: "directory that receives <UTC time>-bench-rdmacm-vm/" + bench.FileName},
		}, vmFlags()...),
		Action: interruptible(s, runBenchRDMACM),
	}
}

func runBenchRDMACM(ctx context.Context, c *cli.Context, s Streams) error {
	if b := c.String("backend"); b != "vm" {
		return fail(ExitUsage, "bench rdmacm: --backend %q: only vm (cmtime's server and both clients in the Soft-RoCE guest)", b)
	}
	req := vm.CMBenchRequest{N: c.Int("connections"), Passes: c.Int("passes"), Port: c.Int("cm-port"), Timeout: c.Duration("op-timeout")}
	if req.N < 1 || req.Passes < 1 {
		return fail(ExitUsage, "bench rdmacm: --connections and --passes must be at least 1")
	}
	if req.Port < 1 || req.Port > 65535 {
		return fail(ExitUsage, "bench rdmacm: --cm-port %d: want 1-65535", req.Port)
	}
	for _, m := range strings.Split(c.String("cm-modes"), ",") {
		m = strings.TrimSpace(m)
		if m != bench.CMInterleaved && m != bench.CMLockstep {
			return fail(ExitUsage, "bench rdmacm: --cm-modes %q: want %s and/or %s", m, bench.CMInterleaved, bench.CMLockstep)
		}
		req.Modes = append(req.Modes, m)
	}
	cmtime, err := exec.LookPath(c.String("cmtime"))
	if err != nil {
		return fail(ExitUsage, "bench rdmacm: --cmtime: %v (Debian package rdmacm-utils)", err)
	}
	if req.CMTime, err = filepath.Abs(cmtime); err != nil {
		return err
	}
	dir, err := result.NewRunDir(c.String("results"), "bench-rdmacm-vm", time.Now())
	if err != nil {
		return err
	}
	path := filepath.Join(dir, bench.FileName)
	opts := guestOptions(c)
	run := bench.NewRun(Version, os.Args, result.Backend{Name: "vm"},
		bench.Config{N: req.N, Passes: req.Passes, Concurrency: req.N, TimeoutSec: req.Timeout.Seconds()})
	run.RDMACM = &bench.CMRun{N: req.N, Passes: req.Passes, Modes: req.Modes, Limits: bench.CMLimits(opts.CPUs)}
	progress := func(m bench.CMMeasurement) {
		run.RDMACM.Measurements = append(run.RDMACM.Measurements, m)
		line := fmt.Sprintf("  pass %d %-22s %d/%d connected in %.2f s: %.1f connects/s",
			m.Pass, report.CMClientName(m), m.Connected, m.Attempted, m.Sec, m.PerSec)
		if m.Error != "" {
			line += " (" + m.Error + ")"
		}
		fmt.Fprintln(s.Err, line)
		run.Save(path)
	}

	opts.ConsoleLog = filepath.Join(dir, "guest-console.log")
	g, err := vm.BootCMGuest(ctx, opts, []string{req.CMTime})
	if err == nil {
		run.Backend.Description = g.Description()
		screen.Println(s.Out, screen.Width(s.Out), "backend: "+g.Description())
		var got *bench.CMRun
		got, err = g.BenchRDMACM(ctx, req, progress)
		if got != nil {
			got.Limits = run.RDMACM.Limits
			if len(got.Measurements) >= len(run.RDMACM.Measurements) {
				run.RDMACM = got
			}
		}
		g.Close()
	}
	return finishBench(s, run, dir, path, report.PrintCMBench, err)
}
