package app

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/bench"
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
		UsageText: "rdmaprobe bench rdmacm --backend vm --n 1000 --passes 3\n\n" +
			"In one Soft-RoCE guest, against one cmtime server (cmtime -b ADDR -p PORT -c N), in turns:\n" +
			"cmtime's client (cmtime -s ADDR -p PORT -c N), then rdmaprobe's generator in each of\n" +
			"--cm-modes, N connections each, all started together, --passes times. cmtime's connects/s\n" +
			"is N over the sum of its printed totals for create id, resolve addr, resolve route, create\n" +
			"qp and connect; rdmaprobe's is connections established over the time from the first\n" +
			"resolve to the last ESTABLISHED. Prints a table per pass and each mode's median ratio\n" +
			"(target ≥ 1.0).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "backend", Value: "vm", Usage: "vm only: the comparison runs inside the Soft-RoCE guest"},
			&cli.IntFlag{Name: "n", Value: 1000, Usage: "connections per client and pass"},
			&cli.IntFlag{Name: "passes", Value: DefaultBenchPasses, Usage: "turns of every client (cmtime, rdmaprobe, cmtime, rdmaprobe, ...)"},
			&cli.StringFlag{Name: "cm-modes", Value: bench.CMInterleaved + "," + bench.CMLockstep, Usage: "how rdmaprobe's generator steps its connections, each measured in every pass: interleaved (each moves on as its events come) and/or lockstep (every step for all before the next, as cmtime)"},
			&cli.StringFlag{Name: "cmtime", Value: "cmtime", Usage: "the cmtime program (rdmacm-utils), carried into the guest"},
			&cli.IntFlag{Name: "cm-port", Value: 7471, Usage: "the port cmtime's server listens on in the guest"},
			&cli.DurationFlag{Name: "op-timeout", Value: 2 * time.Minute, Usage: "deadline of each client's N connections"},
			&cli.StringFlag{Name: "out", Aliases: []string{"results"}, Value: "results", Usage: "directory that receives <UTC time>-bench-rdmacm-vm/" + bench.FileName},
		}, vmFlags()...),
		Action: interruptible(s, runBenchRDMACM),
	}
}

func runBenchRDMACM(ctx context.Context, c *cli.Context, s Streams) error {
	if b := c.String("backend"); b != "vm" {
		return fail(ExitUsage, "bench rdmacm: --backend %q: only vm (cmtime's server and both clients in the Soft-RoCE guest)", b)
	}
	req := vm.CMBenchRequest{N: c.Int("n"), Passes: c.Int("passes"), Port: c.Int("cm-port"), Timeout: c.Duration("op-timeout")}
	if req.N < 1 || req.Passes < 1 {
		return fail(ExitUsage, "bench rdmacm: --n and --passes must be at least 1")
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
	dir, err := result.NewRunDir(c.String("out"), "bench-rdmacm-vm", time.Now())
	if err != nil {
		return err
	}
	path := filepath.Join(dir, bench.FileName)
	opts := guestOptions(c)
	run := &bench.Run{SchemaVersion: bench.SchemaVersion, Tool: bench.Tool, Kind: bench.Kind,
		ToolVersion: Version, Command: os.Args, StartedAt: time.Now().UTC(),
		Backend: result.Backend{Name: "vm"}, Host: bench.Local(nil),
		Config: bench.Config{N: req.N, Passes: req.Passes, Concurrency: req.N, TimeoutSec: req.Timeout.Seconds()},
		RDMACM: &bench.CMRun{N: req.N, Passes: req.Passes, Modes: req.Modes, Limits: cmLimits(opts.CPUs)}}
	save := func() error { return saveBench(run, path) }
	progress := func(m bench.CMMeasurement) {
		run.RDMACM.Measurements = append(run.RDMACM.Measurements, m)
		fmt.Fprintf(s.Err, "  pass %d %-22s %d/%d connected in %.2f s: %.1f connects/s%s\n",
			m.Pass, cmClientName(m), m.Connected, m.Attempted, m.Sec, m.PerSec, errSuffix(m.Error))
		save()
	}

	opts.ConsoleLog = filepath.Join(dir, "guest-console.log")
	g, err := vm.BootCMGuest(ctx, opts, []string{req.CMTime})
	if err == nil {
		run.Backend.Description = g.Description()
		fmt.Fprintf(s.Out, "backend: %s\n", g.Description())
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
	return finishBench(s, run, dir, path, printCMBench, err)
}

// cmLimits says what bounds both clients in the guest.
func cmLimits(cpus int) string {
	return fmt.Sprintf("Both clients and cmtime's server share the guest's %d emulated CPUs (QEMU TCG), so each connect "+
		"costs CPU on both ends at once; and every rdma_cm step of either client (address and route resolution, the "+
		"CM's REQ, REP and RTU, and the server's accept) goes through the guest kernel's rdma_cm and ib_cm work queues.", cpus)
}

func cmClientName(m bench.CMMeasurement) string {
	if m.Mode != "" {
		return m.Client + " (" + m.Mode + ")"
	}
	return m.Client
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " (" + e + ")"
}

// printCMBench writes two tables per pass, the connects/s of each client
// and their connect steps, each step column meaning the same for both
// clients; then each mode's median ratio and what limits both.
func printCMBench(w io.Writer, run *bench.Run) error {
	cm := run.RDMACM
	for p := 1; p <= cm.Passes; p++ {
		var ms []bench.CMMeasurement
		for _, m := range cm.Measurements {
			if m.Pass == p {
				ms = append(ms, m)
			}
		}
		if len(ms) == 0 {
			continue
		}
		t := newTable(w)
		t.Header([]string{fmt.Sprintf("Pass %d", p), "Connected", "s", "connects/s", "× cmtime"})
		var base float64
		for _, m := range ms {
			ratio := ""
			if m.Client == bench.CMTimeClient {
				base = m.PerSec
			} else if base > 0 && m.PerSec > 0 {
				ratio = fmt.Sprintf("%.2f", m.PerSec/base)
			}
			t.Append([]string{cmClientName(m), fmt.Sprintf("%d/%d", m.Connected, m.Attempted),
				fmt.Sprintf("%.2f", m.Sec), fmt.Sprintf("%.1f", m.PerSec), ratio})
		}
		if err := t.Render(); err != nil {
			return err
		}
		t = newTable(w)
		t.Header([]string{fmt.Sprintf("Pass %d step", p), "Client", "min ms/conn", "p50 ms/conn", "max ms/conn", "all N ms"})
		rows := 0
		for _, n := range bench.CMStepNames {
			for _, m := range ms {
				for _, st := range bench.CMStepTimes(m) {
					if st.Step == n[0] {
						t.Append([]string{st.Step, cmClientName(m), msCell(st.MinMS), msCell(st.P50MS), msCell(st.MaxMS), msCell(st.AllMS)})
						rows++
					}
				}
			}
		}
		if rows > 0 {
			if err := t.Render(); err != nil {
				return err
			}
		}
	}
	fmt.Fprintln(w, "(ms/conn: one connection's step, from its call to its completion; all N ms: from the step's first call to its last completion over all N, cmtime's total; — where the client does not measure it)")
	for _, r := range cm.Ratios {
		fmt.Fprintf(w, "rdmaprobe (%s) / cmtime connects/s: median %.2f× over %d passes (%s) — target ≥ %.1f: %s\n",
			r.Mode, r.Median, len(r.ByPass), joinRatios(r.ByPass), bench.MinCMRatio, yesNo(r.Met))
	}
	if cm.Limits != "" {
		fmt.Fprintln(w, "What limits both: "+cm.Limits)
	}
	return nil
}

// msCell is a step's figure in ms, or a dash where it was not measured.
func msCell(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

func joinRatios(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(s, ", ")
}
