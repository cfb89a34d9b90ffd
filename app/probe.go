package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/live"
	"github.com/rdmaprobe/rdmaprobe/probe"
	"github.com/rdmaprobe/rdmaprobe/progress"
	"github.com/rdmaprobe/rdmaprobe/report"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
	"github.com/rdmaprobe/rdmaprobe/session"
	"github.com/rdmaprobe/rdmaprobe/slo"
)

// probeFlags are shared by search and ramp.
func probeFlags() []cli.Flag {
	return append([]cli.Flag{
		tlsKexFlag(),
		detachFlag(),
		&cli.Float64Flag{Name: "threshold", Value: 100, Usage: "success rate in percent a point must reach to pass"},
		&cli.IntFlag{Name: "trials", Value: 1, Usage: "trials per client count (pooled for the pass decision)"},
		&cli.IntFlag{Name: "max-clients", Usage: "the server's cap, clients it admits at once (not the search's ceiling: that is --hi); default: each point's client count"},
		&cli.StringFlag{Name: "mode", Value: runner.DefaultMode, Usage: "server resources per client: per-client (1 QP + 2 CQ + 2 MR), shared-cq (1 QP + 2 MR), pool (1 QP; one registered pool), srq (1 QP without RQ; pool + shared receive queue), ud (no QP: 1 address handle; one UD QP per group, pool) or mux (--mux logical clients per QP, each admitted on its own; 1 QP + 2 CQ + 2 MR per QP); a comma-separated list (per-client,srq) measures each design in the same run: ramp in turns at every count, search one search per design, taking turns; --require then holds for each"},
		muxFlag(),
		&cli.StringFlag{Name: "gomaxprocs", Value: runner.GoMaxProcsSplit, Usage: "how the server's and load generators' Go runtimes share this machine's CPUs: split (server half, generators the rest) or all (Go's default: each sized to every CPU, their idle threads spin against each other)"},
		&cli.IntFlag{Name: "procs", Value: 1, Usage: "load-generator processes the clients are spread over"},
		&cli.Float64Flag{Name: "connect-rate", Usage: "client launches per second over all generators (0 = all at once)"},
		&cli.BoolFlag{Name: "tls-resume", Usage: "let each load generator's clients resume TLS sessions (a server facing returning clients; default: every client does a full mutual-TLS handshake)"},
		&cli.IntFlag{Name: "inflight", Value: protocol.DefaultInFlight, Usage: "connection attempts in progress at once per load generator (0 = unbounded burst); connected clients stay open either way"},
		&cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "per-client deadline"},
		&cli.IntFlag{Name: "wall-stop", Value: runner.DefaultWallStop, Usage: "a load generator launches no more clients once its point has failed and its last N clients in a row were turned away by a resource (refused at capacity, or ENOMEM, EAGAIN, EMFILE… creating their resources): past a wall each further client only costs a handshake; the rest count as unlaunched (built-in clients; 0 = launch every client)"},
		&cli.IntFlag{Name: "rounds", Value: 3, Usage: "verified round trips per client"},
		&cli.IntFlag{Name: "msg-size", Value: 4096, Usage: "payload bytes per message"},
		&cli.StringFlag{Name: "results", Value: "results", Usage: "directory that receives <UTC time>-<backend>/run.json (run.json.gz above 1 MB)"},
		&cli.BoolFlag{Name: "quiet", Usage: "print only the verdict, at the end: no progress, point lines, table or file names (errors still go to stderr)"},
		&cli.IntFlag{Name: "backlog", Usage: "server listen queue length (default: somaxconn)"},
		&cli.IntFlag{Name: "srq-depth", Usage: "receive buffers of each SRQ of the built-in server in --mode srq (default: a buffer for every message its clients can have in flight, twice over); fewer than the clients keep outstanding plants a receive shortage, which RNR NAKs show"},
		&cli.StringFlag{Name: "profile", Usage: "write CPU profiles (pprof) of the server and load generators of every point into `DIR` (every backend; the vm backend copies them out of the guest)"},
		&cli.BoolFlag{Name: "stop-on-error", Usage: "stop at the first point that itself fails (server died, load generator crashed or hung) instead of counting it as failed and going on"},
		&cli.DurationFlag{Name: "calibrate", Value: runner.DefaultCalibration, Usage: "measure this machine's speed (serial TLS handshakes in one process) for this long before and after each point, to tell a slow host from a slow server (0 = off)"},
		&cli.DurationFlag{Name: "sample-interval", Value: 500 * time.Millisecond, Usage: "how often the collectors sample resources, processes and the host (0 = off)"},
	}, append(append(append(append(append(append(append(trafficFlags(), liveFlags()...), vmFlags()...), simInVMFlag(), vmPeerFlag(), vmNoReferenceFlag()), limitFlags()...), fabricFlags()...), targetFlags()...), remoteFlags()...)...)
}

func searchCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:  "search",
		Usage: "binary-search the largest client count that connects at --threshold",
		UsageText: "rdmaprobe search --lo 300 --hi 600\n" +
			"rdmaprobe search --backend sim --lo 100 --sim-max-qp 450\n" +
			"rdmaprobe search --lo 1000 --resolution 2% --trials 3 --threshold 95\n" +
			"rdmaprobe search --lo 1 --hi 1000 --criterion traffic --slo 'p99<=2ms' --require 500",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "lo", Value: 100, Usage: "lowest client count to test"},
			&cli.IntFlag{Name: "hi", Usage: "highest client count; omitted = search upward exponentially from --lo"},
			&cli.IntFlag{Name: "max-n", Value: 1000000, Usage: "upper bound for the exponential search when --hi is omitted"},
			&cli.StringFlag{Name: "resolution", Value: "1", Usage: "stop once the breaking point is bracketed this narrowly: clients (1 = exact), or a percentage of the capacity like 2%"},
		}, probeFlags()...),
		Action: func(c *cli.Context) error {
			lo, hi := c.Int("lo"), c.Int("hi")
			if lo < 1 {
				return fail(ExitUsage, "--lo must be at least 1 (got %d)", lo)
			}
			if hi != 0 && hi < lo {
				return fail(ExitUsage, "--hi %d is below --lo %d", hi, lo)
			}
			res, err := probe.ParseResolution(c.String("resolution"))
			if err != nil {
				return fail(ExitUsage, "--resolution %v", err)
			}
			return runProbe(c, s, "search", func(ctx context.Context, designs []string, cfg probe.Config, m probe.DesignMeasure, obs func(probe.Event)) ([]result.Search, []result.Point, error) {
				cfg.Lo, cfg.Hi, cfg.MaxN, cfg.Resolution = lo, hi, c.Int("max-n"), res
				return probe.SearchDesigns(ctx, designs, cfg, m, obs)
			})
		},
	}
}

func rampCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:  "ramp",
		Usage: "measure each client count of a list",
		UsageText: "rdmaprobe ramp --clients 10,50,100,200 --trials 3\n" +
			"rdmaprobe ramp --backend vm --clients 1,10,100,1000 --traffic 10s --busy-poll 2ms\n" +
			"rdmaprobe ramp --clients 100,500 --require 500",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "clients", Value: "10,50,100,200,300", Usage: "comma-separated client counts; LO..HI:STEP is a range (20000..500000:20000)"},
			&cli.BoolFlag{Name: "staircase", Usage: "climb --clients as cumulative steps without releasing anyone, stop at the first step that fails, then confirm the count held with one fresh point (docs/guide.md)"},
		}, probeFlags()...),
		Action: func(c *cli.Context) error {
			list, err := parseCounts(c.String("clients"))
			if err != nil {
				return fail(ExitUsage, "--clients: %v", err)
			}
			if c.Bool("staircase") {
				return runProbe(c, s, "ramp", nil)
			}
			return runProbe(c, s, "ramp", func(ctx context.Context, designs []string, cfg probe.Config, m probe.DesignMeasure, obs func(probe.Event)) ([]result.Search, []result.Point, error) {
				return probe.RampDesigns(ctx, designs, list, cfg, m, obs)
			})
		},
	}
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ReplaceAll(f, "_", ""))
		if f == "" {
			continue
		}
		if strings.Contains(f, "..") {
			r, err := parseRange(f)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive client count", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no client counts given")
	}
	return out, nil
}

// maxRangeCounts bounds the counts one range may list: more is a typo
// (a step of 1 over a wide range), not a ramp anyone waits for.
const maxRangeCounts = 10_000

// parseRange reads LO..HI:STEP, the counts LO, LO+STEP, … HI.
func parseRange(f string) ([]int, error) {
	bad := func(why string) error {
		return fmt.Errorf("%q: %s (a range is LO..HI:STEP, like 20000..500000:20000)", f, why)
	}
	span, step, ok := strings.Cut(f, ":")
	if !ok {
		return nil, bad("no :STEP")
	}
	los, his, _ := strings.Cut(span, "..")
	lo, err1 := strconv.Atoi(los)
	hi, err2 := strconv.Atoi(his)
	st, err3 := strconv.Atoi(step)
	switch {
	case err1 != nil || err2 != nil || err3 != nil:
		return nil, bad("LO, HI and STEP must be whole numbers")
	case lo < 1:
		return nil, bad("LO must be at least 1")
	case hi < lo:
		return nil, bad("HI is below LO")
	case st < 1:
		return nil, bad("STEP must be at least 1")
	case (hi-lo)%st != 0:
		return nil, bad("HI - LO is not a multiple of STEP")
	case (hi-lo)/st >= maxRangeCounts:
		return nil, bad(fmt.Sprintf("more than %d counts", maxRangeCounts))
	}
	var out []int
	for n := lo; n <= hi; n += st {
		out = append(out, n)
	}
	return out, nil
}

// plainEvery is how often a plain progress line is written off a
// terminal; a variable so that tests need not wait for it.
var plainEvery = progress.DefaultEvery

// runProbe is search and ramp: flags to one session.Options, then the
// session runs and saves the points while this prints them.
func runProbe(c *cli.Context, s Streams, mode string, strat session.Strategy) (err error) {
	be, spec, err := probeBackend(c, s)
	if err != nil {
		return err
	}
	slos, err := slo.Parse(c.String("slo"))
	if err != nil {
		return fail(ExitUsage, "--slo: %v", err)
	}
	lv, err := openLive(c, &s)
	if err != nil {
		return err
	}
	be.out = s.Out
	var ss *session.Session
	defer func() {
		if ss == nil {
			lv.events.RunEnds(nil, "", err)
		} else {
			lv.events.RunEnds(ss.Run, ss.Path, err)
			lv.metrics.RunEnds(ss.Run.Verdict)
		}
		// A signal ends the linger at once, as it would the run.
		lctx, lstop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
		defer lstop()
		if e := lv.close(lctx, s.Err); err == nil && e != nil {
			err = fail(ExitRunError, "%v", e)
		}
	}()
	// The width of the stream the lines go to (stderr with --events -).
	width := screen.Width(s.Out)
	// Every line of the run goes through scr, above its bars.
	scr := progress.New(s.Out, progress.Options{Quiet: c.Bool("quiet"), Every: plainEvery, Traffic: spec.Traffic.Duration})
	defer scr.Close()
	// The guest's and remote hosts' lines, laid out for the width too.
	be.out = &screen.Lines{W: scr, Width: width}
	if be.guest != nil {
		be.guest.Out = be.out
	}
	pr := &probeRun{c: c, out: scr, width: width, mode: mode, strat: strat, be: be, spec: spec, scr: scr, lv: lv}
	o := pr.options()
	o.SLOs, o.Criterion, o.Require = slos, c.String("criterion"), c.String("require")
	if err := o.Check(); err != nil {
		return fail(ExitUsage, "%v", err)
	}
	screen.Println(scr, width, fmt.Sprintf("backend: %s (%s)", be.Description, be.Reason))

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Stopping a point takes a few seconds (its generators report the
	// outcomes so far, a guest sends them back): say so, and let a
	// second Ctrl-C end the process at once.
	defer context.AfterFunc(ctx, func() {
		stop()
		screen.Println(scr, width, "interrupted: stopping the point in progress and saving what it measured (Ctrl-C again quits at once)")
	})()
	ss, err = session.Run(ctx, o)
	scr.Close()
	if err != nil {
		if ctx.Err() != nil {
			return fail(ExitInterrupted, "interrupted: %v", err)
		}
		return err
	}
	run, path := ss.Run, ss.Path
	if c.Bool("quiet") {
		if run.Verdict != nil {
			for _, l := range report.VerdictLines(*run.Verdict) {
				screen.Println(s.Out, width, l)
			}
		}
		s.Out = io.Discard
	}
	fmt.Fprintln(s.Out)
	if err := report.Terminal(s.Out, run, width); err != nil {
		return err
	}
	report.PrintFindings(s.Out, run, width)
	screen.Println(s.Out, width, "saved "+path)
	// The same code as `rdmaprobe report run.json`, so a saved run
	// renders again to the same bytes.
	if err := writeReport(s, run, ss.Dir, report.Formats); err != nil {
		return err
	}
	if perr := ss.Err; perr != nil {
		return pointError(perr, run, path)
	}
	line, met := report.RequireLine(run)
	if !met {
		return fail(ExitRequirement, "%s", line)
	}
	if line != "" {
		fmt.Fprintln(s.Out, line)
	}
	return nil
}

// probeBackend checks the flags that say where and against what the
// points run, and returns the backend and the point spec they make.
func probeBackend(c *cli.Context, s Streams) (*backend, runner.Spec, error) {
	if err := checkTLSKex(c); err != nil {
		return nil, runner.Spec{}, fail(ExitUsage, "--tls-kex: %v", err)
	}
	if err := checkOff(c); err != nil {
		return nil, runner.Spec{}, err
	}
	be, err := chooseBackend(c)
	if err != nil {
		return nil, runner.Spec{}, fail(ExitUsage, "%v", err)
	}
	spec := probeSpec(c, be)
	if err := targetSpec(c, &spec); err != nil {
		return nil, spec, fail(ExitUsage, "%v", err)
	}
	if err := listenSpec(c, &spec); err != nil {
		return nil, spec, fail(ExitUsage, "%v", err)
	}
	be.buildCache = c.String("server-build-cache")
	if be.remote, err = placement(c, spec); err != nil {
		return nil, spec, fail(ExitUsage, "%v", err)
	}
	be.out = s.Out
	if be.remote != nil && be.guest != nil {
		return nil, spec, fail(ExitUsage, "generators on other hosts (--hosts, --launcher) run with --backend verbs or sim, not in the vm backend's guest")
	}
	if be.guest != nil && (spec.Server != nil || spec.Client != nil) {
		be.Description = "vm: " + vm.GuestNetdevDevice + " on a dummy netdev, " + vm.GuestNetdevAddr + " (Soft-RoCE in a QEMU guest)"
	}
	return be, spec, nil
}

// probeRun is one search or ramp as the flags set it up: what its
// session needs, and where each point, note and decision is shown as it
// comes (the terminal and the live views).
type probeRun struct {
	c     *cli.Context
	out   io.Writer
	width int // out's columns, 0 off a terminal (screen.Width)
	mode  string
	strat session.Strategy
	be    *backend
	spec  runner.Spec
	scr   *progress.Screen
	lv    *liveViews
	// designs are the server designs measured in turns (more than one).
	designs []string
}

// options are the session's options for the run: the spec and backend,
// the counts to run, and r, which shows the run as it goes
// (session.Observer).
func (r *probeRun) options() session.Options {
	c, be := r.c, r.be
	o := session.Options{
		Mode: r.mode, Command: os.Args, ToolVersion: Version, ResultsDir: c.String("results"),
		Backend: be.Backend, Spec: r.spec, Trials: c.Int("trials"), StopOnError: c.Bool("stop-on-error"),
		Target:   session.TargetRecord(r.spec, c.StringSlice("target-dir"), be.targetDevice(r.spec), be.targetAddr(r.spec)),
		Strategy: r.strat, Open: r.open, ProfileDir: c.String("profile"),
		SLOText: c.String("slo"), Observer: r,
	}
	if be.remote != nil && be.remote.Slots() > 0 && !c.IsSet("procs") {
		o.Spec.Procs = be.remote.Slots()
	}
	if ds := modes(c); len(ds) > 1 {
		o.Designs, r.designs = ds, ds
	}
	if r.mode == "search" {
		o.Lo, o.Hi = c.Int("lo"), c.Int("hi")
	} else {
		o.Clients, _ = parseCounts(c.String("clients"))
		o.Staircase = c.Bool("staircase")
	}
	return o
}

// open opens the backend's runner; a guest's boot shows while it runs.
func (r *probeRun) open(ctx context.Context, spec runner.Spec, dir string, local runner.LocalOptions) (runner.Runner, error) {
	if r.be.guest != nil {
		defer r.scr.Boot()()
	}
	return r.be.open(ctx, spec, dir, local)
}

func (r *probeRun) Progress(p runner.Progress) {
	r.scr.Update(p)
	switch {
	case p.Sample != nil:
		r.lv.metrics.Sample(*p.Sample)
	case p.Traffic != nil:
		r.lv.metrics.Traffic(p.Traffic.Messages, p.Traffic.Bytes, p.Traffic.Sec)
	case p.Phase == runner.PhaseConnect:
		r.lv.metrics.Progress(p.Clients, p.Done, p.OK, p.Failed, p.Phases)
		r.lv.events.Progress(p.Done, p.OK, p.Failed)
	}
}

func (r *probeRun) PointStarts(design string, n, trial int) {
	r.lv.metrics.PointStarts(design, n, trial)
	r.lv.events.PointStarts(design, n, trial)
	label := fmt.Sprintf("%d clients", n)
	if r.c.Int("trials") > 1 || trial > 1 {
		label += fmt.Sprintf(" (trial %d)", trial)
	}
	if len(r.designs) > 1 {
		label = design + ": " + label
	}
	r.scr.PointStarts(label)
}

func (r *probeRun) Started(id string, run *result.Run) {
	r.lv.metrics.Start(live.Labels{RunID: id, Backend: run.Backend.Name, Command: r.mode})
	r.lv.events.RunStarts(id, run)
}

func (r *probeRun) Point(pt result.Point) {
	r.lv.metrics.PointEnds(pt)
	r.lv.events.PointEnds(pt)
	r.scr.PointEnds()
	lines := report.PointLines(pt, r.be.Backend.Simulated)
	if len(r.designs) > 1 {
		lines[0] = pt.Design + ": " + strings.TrimLeft(lines[0], " ")
	}
	for _, l := range lines {
		screen.Println(r.out, r.width, l)
	}
}

func (r *probeRun) Note(note string) {
	r.lv.events.Note(note)
	screen.Println(r.out, r.width, "note: "+note)
}

func (r *probeRun) Decision(n int, why string) {
	r.lv.events.Decision(n, why)
	screen.Println(r.out, r.width, fmt.Sprintf("next: %d clients (%s)", n, why))
}

// pointError is the error of a run that ended with a failed point,
// saying what was saved where.
func pointError(perr error, run *result.Run, path string) error {
	saved := fmt.Sprintf("%d points", len(run.Points))
	if len(run.Points) == 1 {
		saved = "1 point"
	}
	if p := run.Interrupted; p != nil {
		saved += fmt.Sprintf(" and the one cut short (%d clients: %d connected of %d with an outcome)", p.Clients, p.Connected, p.Attempted)
	}
	if errors.Is(perr, context.Canceled) {
		return fail(ExitInterrupted, "interrupted: %s saved in %s", saved, path)
	}
	return fail(ExitRunError, "%v (%s saved in %s)", perr, saved, path)
}

// modes are the server designs --mode names, in the order given: one,
// or a comma-separated list measured in turns.
func modes(c *cli.Context) []string {
	var out []string
	for _, m := range strings.Split(c.String("mode"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return []string{""}
	}
	return out
}

// probeSpec is the workload the probe flags describe, on backend be.
func probeSpec(c *cli.Context, be *backend) runner.Spec {
	sp := runner.Spec{
		Fabric: be.fabric, MaxClients: c.Int("max-clients"), Mode: modes(c)[0], Mux: c.Int("mux"),
		Procs: c.Int("procs"), Rate: c.Float64("connect-rate"), Timeout: c.Duration("timeout"), Rounds: c.Int("rounds"),
		MsgSize: c.Int("msg-size"), Threshold: c.Float64("threshold") / 100, InFlight: c.Int("inflight"),
		WallStop: c.Int("wall-stop"), TLSResume: c.Bool("tls-resume"), Detach: c.Bool("detach"), TLSKex: c.String("tls-kex"),
		GoMaxProcs: c.String("gomaxprocs"), Backlog: c.Int("backlog"), SRQDepth: c.Int("srq-depth"), NoFile: c.Uint64("nofile"), MemLock: c.Uint64("memlock"),
		SampleInterval: offIfZero(c.Duration("sample-interval")), CalibrationWindow: offIfZero(c.Duration("calibrate")),
		Profile: c.String("profile") != "", Traffic: trafficConfig(c), GeneratorSlack: generatorSlack,
	}
	return sp
}

// generatorSlack is runner.Spec.GeneratorSlack (0 = the runner's), a
// variable only so that a test of a hung generator need not wait 10 s.
var generatorSlack time.Duration

// offIfZero maps a duration flag's 0 ("off") to the runner's -1.
func offIfZero(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
