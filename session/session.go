// Package session runs one capacity probe from one Options value: it
// builds the run record, creates the run's certificate pairs once, opens
// the Runner, measures the points the search strategy asks for, saves
// run.json after every point, checks the PSNs and lifts the limits and
// the diagnosis to the run (analysis.Summarise). It prints nothing: the
// caller is told about progress, points and notes through its
// Observer.
package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/probe"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/slo"
)

// Strategy chooses the points of every server design: probe.SearchDesigns
// or probe.RampDesigns with their arguments bound. It returns one search
// per design, in designs' order.
type Strategy func(ctx context.Context, designs []string, cfg probe.Config, m probe.DesignMeasure, obs func(probe.Event)) ([]result.Search, []result.Point, error)

// Opener returns the Runner of spec's points; dir is the run's directory
// (a guest writes its console log there), local what a Local runner
// needs of the run.
type Opener func(ctx context.Context, spec runner.Spec, dir string, local runner.LocalOptions) (runner.Runner, error)

// Options are one probe run.
type Options struct {
	// Mode is "search" or "ramp"; Lo and Hi (search) or Clients (ramp)
	// are recorded with the run.
	Mode    string
	Lo, Hi  int
	Clients []int
	// Command and ToolVersion are recorded as they are.
	Command     []string
	ToolVersion string
	// ResultsDir receives <UTC time>-<backend>/run.json.
	ResultsDir string
	Backend    result.Backend
	Spec       runner.Spec
	// Designs are the server designs (resource modes) measured in turns
	// when there are several; empty or one: Spec.Mode alone. The runner
	// must then be a runner.ModeSetter.
	Designs []string
	// Trials per client count, and whether a point that itself failed
	// stops the run (the threshold is Spec.Threshold).
	Trials      int
	StopOnError bool
	Strategy    Strategy
	// Staircase, in place of Strategy, climbs Clients as a staircase's
	// cumulative steps (probe.Staircase); the runner must be a
	// runner.Climber.
	Staircase bool
	Open      Opener
	// ProfileDir receives the CPU profiles when Spec.Profile is set.
	ProfileDir string
	// Target names a server or clients that are commands (recorded).
	Target *result.Target
	// SLOs are checked on every point's traffic phase (SLOText is how
	// they were written); Criterion is what a point must meet to pass
	// (result.CriterionConnect when empty; CriterionTraffic: and its
	// traffic phase the SLOs).
	SLOs      []slo.SLO
	SLOText   string
	Criterion string
	// Require is --require as given, "N" (by Criterion) or
	// "N:criterion" ("" without one); the run records it as
	// "N:criterion" and its verdict says whether it was met.
	Require string

	// Observer, if set, is told what happens as it happens.
	Observer Observer
}

// Observer is told what happens in a run, from one goroutine at a
// time: how the run's views (the terminal, --events, --metrics-addr)
// follow it.
type Observer interface {
	// Started is told the run's ID (its directory's name) and the run
	// as created, before the runner opens; it must not keep run.
	Started(id string, run *result.Run)
	// PointStarts and Point are told the start and the outcome of each
	// point, Progress its live counts.
	PointStarts(design string, n, trial int)
	Progress(runner.Progress)
	Point(result.Point)
	// Decision is told before each count is measured why the strategy
	// chose it, Note the strategy's notes; both begin with the design
	// they are of ("srq: ") in a run of several designs.
	Decision(n int, why string)
	Note(string)
}

// Quiet is an Observer told nothing; embed it to observe only some
// events.
type Quiet struct{}

func (Quiet) Started(string, *result.Run)  {}
func (Quiet) PointStarts(string, int, int) {}
func (Quiet) Progress(runner.Progress)     {}
func (Quiet) Point(result.Point)           {}
func (Quiet) Decision(int, string)         {}
func (Quiet) Note(string)                  {}

// Session is a run that was saved.
type Session struct {
	Run *result.Run
	Dir string
	// Path is the file the last save wrote: run.json, or run.json.gz
	// once the run is larger than result.GzipAbove.
	Path string
	// Err is why the probe stopped early (interrupted: context.Canceled;
	// a point that failed with StopOnError); run.json says so too.
	Err error
}

// Run runs the probe. The error is for what kept the run from starting
// or from being saved; completed points are on disk either way. A run
// that cannot start leaves nothing behind (see notStarted).
func Run(ctx context.Context, o Options) (*Session, error) {
	dir, err := result.NewRunDir(o.ResultsDir, o.Backend.Name, time.Now())
	if err != nil {
		return nil, err
	}
	s := &Session{Dir: dir, Run: newRun(o)}
	run := s.Run
	see := o.Observer
	if see == nil {
		see = Quiet{}
	}
	see.Started(filepath.Base(dir), run)
	pairs, err := certs.NewPairs()
	if err != nil {
		return nil, s.notStarted(err)
	}
	// The directory exists before the runner opens, because a guest
	// writes its console log there while it boots.
	spec := o.Spec
	if len(o.Designs) > 1 {
		spec.Designs = o.Designs // the references the runner takes follow every design
	}
	r, err := o.Open(ctx, spec, dir, runner.LocalOptions{Certs: pairs, ProfileDir: o.ProfileDir, Progress: see.Progress})
	if err != nil {
		return nil, s.notStarted(err)
	}
	defer r.Close()
	designs := o.designs()
	setMode, _ := r.(runner.ModeSetter)
	if len(designs) > 1 && setMode == nil {
		return nil, s.notStarted(fmt.Errorf("--mode with several designs: this runner cannot change the server's design between points"))
	}
	if s.Path, err = result.SaveRun(dir, run); err != nil {
		return nil, err
	}
	describe := func() {
		if run.Environment.Device == nil {
			run.Environment.Device = r.Device()
		}
		if d, ok := r.(runner.Describer); ok {
			d.Describe(run)
		}
	}
	describe()

	var mu sync.Mutex
	var saveErr error
	// keep adds a point to the run (add, under the run's lock), saves
	// the run and reports the point.
	keep := func(pt *result.Point, add func()) {
		mu.Lock()
		describe()
		add()
		if p, e := result.SaveRun(dir, run); e != nil && saveErr == nil {
			saveErr = e
		} else if e == nil {
			s.Path = p
		}
		mu.Unlock()
		see.Point(*pt)
	}
	// measure runs one point (or a staircase's step) with take and
	// keeps it in the run.
	measure := func(ctx context.Context, design string, n, trial int, take func() (result.Point, error)) (result.Point, error) {
		if setMode != nil {
			setMode.SetMode(design)
		}
		see.PointStarts(design, n, trial)
		pt, err := take()
		pt.Design = design
		if ctx.Err() != nil && !pt.Interrupted {
			// Cancelled while the point ran, in whatever phase and
			// whatever its runner marked: no measurement of n.
			pt.Interrupted, pt.Error = true, runner.Interrupted
			analysis.Judge(&pt, o.Spec.Threshold)
		}
		if pt.Interrupted {
			// Cut short (Ctrl-C, a dead guest): kept with what it
			// measured, apart from the points, since it measured no
			// count; the probe stops on the error.
			if err == nil {
				err = fmt.Errorf("%d clients (trial %d): %s", n, trial, pt.Error)
			}
			keep(&pt, func() { run.Interrupted = &pt })
			return pt, err
		}
		if err != nil && (ctx.Err() == nil || pt.Attempted == 0) {
			return pt, err // nothing measured: no point to keep
		}
		keep(&pt, func() {
			judgeTraffic(&pt, run.ForDesign(design).Points, o.SLOs, o.Criterion)
			analysis.Judge(&pt, o.Spec.Threshold)
			run.Points = append(run.Points, pt)
			run.PSN = result.CheckPSNs(run.Points)
		})
		return pt, err
	}
	record := func(ctx context.Context, design string, n, trial int) (result.Point, error) {
		return measure(ctx, design, n, trial, func() (result.Point, error) { return r.RunPoint(ctx, n, trial) })
	}
	strategy := o.Strategy
	if o.Staircase {
		climber, ok := r.(runner.Climber)
		if !ok {
			return nil, s.notStarted(errors.New("--staircase: this backend's runner cannot hold clients between steps"))
		}
		stair := probe.Stair{
			Climb: func(ctx context.Context, design string, n, top int) (result.Point, error) {
				return measure(ctx, design, n, 1, func() (result.Point, error) { return climber.Climb(ctx, n, top) })
			},
			Descend: func(string) error { return climber.Descend() },
		}
		strategy = func(ctx context.Context, designs []string, cfg probe.Config, m probe.DesignMeasure, obs func(probe.Event)) ([]result.Search, []result.Point, error) {
			return probe.Staircase(ctx, designs, o.Clients, cfg, stair, m, obs)
		}
	}
	obs := func(ev probe.Event) {
		of := ""
		if ev.Design != "" {
			of = ev.Design + ": "
		}
		switch {
		case ev.Kind == probe.EventNote:
			see.Note(of + ev.Note)
		case ev.Kind == probe.EventDecision:
			see.Decision(ev.Step.Clients, of+ev.Note)
		}
	}
	cfg := probe.Config{Threshold: o.Spec.Threshold, Trials: o.Trials, StopOnPointError: o.StopOnError, Epsilon: analysis.Epsilon(o.SLOText)}
	srch, _, perr := strategy(ctx, designs, cfg, record, obs)
	if f, ok := r.(runner.Finisher); ok && ctx.Err() == nil && run.Interrupted == nil {
		f.Finish(ctx)
		describe()
	}
	run.FinishedAt = time.Now().UTC()
	if len(designs) > 1 {
		analysis.SummariseDesigns(run, srch)
	} else {
		if len(srch) == 1 {
			run.Search = &srch[0]
		}
		analysis.Summarise(run)
	}
	v := analysis.Conclude(run)
	run.Verdict = &v
	run.PSN = result.CheckPSNs(run.Points)
	if run.Interrupted != nil {
		// Its clients connected too: their PSNs count.
		run.PSN = result.CheckPSNs(append(append([]result.Point{}, run.Points...), *run.Interrupted))
	}
	run.Complete = perr == nil
	if perr != nil {
		run.Error = perr.Error()
		if errors.Is(perr, context.Canceled) {
			run.Error = "interrupted"
		}
	}
	s.Err = perr
	if s.Path, err = result.SaveRun(dir, run); err != nil {
		return s, err
	}
	return s, saveErr
}

// notStarted is why the run never started, as Run returns it. The run
// directory is removed if nothing was written there, so that a run
// which could not start (no verbs fabric in this binary, a bad option
// the runner found) leaves no empty results behind. A runner that left
// evidence there (the console log of a guest that did not boot) keeps
// it, and run.json beside it says why the run never started, with no
// points; `rdmaprobe report` says that in one line.
func (s *Session) notStarted(why error) error {
	if os.Remove(s.Dir) == nil { // removes only an empty directory
		return why
	}
	s.Run.FinishedAt = time.Now().UTC()
	s.Run.Error = result.NotStarted + why.Error()
	p, err := result.SaveRun(s.Dir, s.Run)
	if err != nil {
		return fmt.Errorf("%w (and saving why in %s: %v)", why, s.Dir, err)
	}
	return fmt.Errorf("%w (%s says so, beside what was written there before it stopped)", why, p)
}

// newRun is the run record before its first point.
func newRun(o Options) *result.Run {
	sp := o.Spec
	run := &result.Run{
		SchemaVersion: result.SchemaVersion, Tool: "rdmaprobe", ToolVersion: o.ToolVersion,
		Command: o.Command, Mode: o.Mode, StartedAt: time.Now().UTC(),
		Backend: o.Backend, Environment: collectors.Environment(), Points: []result.Point{}, Target: o.Target,
		Config: result.Config{
			ResourceMode: sp.Mode, Rounds: sp.Rounds, PayloadBytes: sp.MsgSize,
			ClientTimeout: sp.Timeout.Seconds(), Rate: sp.Rate, Procs: sp.Procs, InFlight: sp.InFlight, WallStop: sp.WallStop,
			TLSResume: sp.TLSResume, TLSKex: sp.TLSKex, GoMaxProcs: sp.GoMaxProcs, Detach: sp.Detach,
			Threshold: sp.Threshold, Trials: o.Trials, MaxClients: sp.MaxClients, Mux: sp.MuxOrDefault(),
		},
	}
	if sp.CM != nil {
		run.Config.ClientKind = result.ClientRDMACM
		run.Config.CMSteps = cmp.Or(sp.CM.Steps, protocol.CMStepsAuto)
	}
	if t := sp.Traffic; protocol.RunsTraffic(t, sp.Client, sp.CM) {
		op := t.Op
		if op == "" {
			op = result.OpSend
		}
		timeout := t.Timeout
		if timeout <= 0 {
			timeout = client.DefaultMsgTimeout
		}
		run.Config.Traffic = &result.TrafficSetup{DurationSec: t.Duration.Seconds(), Op: op, Depth: max(t.Depth, 1),
			RatePerClient: t.Rate, MsgTimeoutSec: timeout.Seconds(), BusyPollUS: float64(t.BusyPoll.Microseconds()),
			MaxDurationSec: max(t.MaxDuration, t.Duration).Seconds()}
		run.Config.SLO = o.SLOText
	}
	if o.Criterion != "" && o.Criterion != result.CriterionConnect {
		run.Config.Criterion = o.Criterion
	}
	run.Config.Require, _ = o.require()
	if o.Mode == "search" {
		run.Config.Lo, run.Config.Hi = o.Lo, o.Hi
	} else {
		run.Config.RampClients = o.Clients
	}
	if len(o.Designs) > 1 {
		run.Config.ResourceMode = strings.Join(o.Designs, ",")
		run.Config.Designs = o.Designs
	}
	if o.Backend.Name == "sim" {
		caps := sp.Fabric.SimCaps()
		run.Config.SimCaps = &caps
	}
	return run
}

// designs are the server designs the run measures, in turn order.
func (o Options) designs() []string {
	if len(o.Designs) > 0 {
		return o.Designs
	}
	return []string{o.Spec.Mode}
}

// Check refuses options no run could use, before anything starts.
func (o Options) Check() error {
	if !(o.Spec.Threshold > 0 && o.Spec.Threshold <= 1) { // NaN too
		return fmt.Errorf("--threshold is a percentage in (0, 100], got %g", o.Spec.Threshold*100)
	}
	if o.Trials < 1 {
		return fmt.Errorf("--trials must be at least 1")
	}
	if o.Staircase {
		if err := o.checkStaircase(); err != nil {
			return err
		}
	}
	if err := o.checkCriterion(); err != nil {
		return err
	}
	if o.Spec.SRQDepth > 0 && (o.Spec.Server != nil || !slices.Contains(append([]string{o.Spec.Mode}, o.Designs...), runner.ModeSRQ)) {
		return fmt.Errorf("--srq-depth %d: only rdmaprobe's own server in --mode srq has an SRQ", o.Spec.SRQDepth)
	}
	if len(o.Designs) > 1 && o.Spec.Server != nil {
		return fmt.Errorf("--mode with several designs needs rdmaprobe's own server: a --server-cmd has its own design")
	}
	for i, d := range o.Designs {
		if slices.Contains(o.Designs[:i], d) {
			return fmt.Errorf("--mode names %s twice", d)
		}
		if err := o.Spec.ForDesign(d).Check(); err != nil {
			return err
		}
	}
	if len(o.Designs) > 1 {
		if o.Spec.Mux != 0 && !slices.Contains(o.Designs, runner.ModeMux) {
			return fmt.Errorf("--mux %d: logical clients share QPs only with --mode %s, which the list lacks", o.Spec.Mux, runner.ModeMux)
		}
		return nil
	}
	return o.Spec.Check()
}

// checkStaircase refuses what a staircase cannot climb: it is one pass
// of built-in clients held by one set of load generators.
func (o Options) checkStaircase() error {
	sp := o.Spec
	switch {
	case o.Trials > 1:
		return fmt.Errorf("--trials %d with --staircase: a staircase is one pass (its steps are cumulative), so it has no trials to pool", o.Trials)
	case sp.Server != nil || sp.Client != nil || sp.CM != nil:
		return fmt.Errorf("--staircase adds clients to rdmaprobe's own TLS clients and server: not with --server-cmd, --client-cmd or --cm")
	}
	if err := probe.CheckSteps(o.Clients); err != nil {
		return fmt.Errorf("--clients with --staircase: %v", err)
	}
	return nil
}

// checkCriterion refuses a criterion or a --require that is not one,
// and one that judges a traffic phase the points do not run.
func (o Options) checkCriterion() error {
	crit := cmp.Or(o.Criterion, result.CriterionConnect)
	if !slices.Contains(result.Criteria, crit) {
		return fmt.Errorf("--criterion %q: want connect or traffic", o.Criterion)
	}
	if crit == result.CriterionTraffic {
		if err := o.Spec.NeedTraffic("--criterion traffic"); err != nil {
			return err
		}
	}
	req, err := o.require()
	if err != nil || !strings.HasSuffix(req, ":"+result.CriterionTraffic) {
		return err
	}
	return o.Spec.NeedTraffic("--require " + o.Require)
}

// require is Require as the run records it, "N:criterion" ("" without
// one).
func (o Options) require() (string, error) {
	if o.Require == "" {
		return "", nil
	}
	num, crit, ok := strings.Cut(strings.TrimSpace(o.Require), ":")
	if !ok {
		crit = cmp.Or(o.Criterion, result.CriterionConnect)
	}
	n, err := strconv.Atoi(strings.ReplaceAll(num, "_", ""))
	if err != nil || n < 1 {
		return "", fmt.Errorf("--require: %q: want a client count of at least 1, optionally :connect or :traffic", o.Require)
	}
	if !slices.Contains(result.Criteria, crit) {
		return "", fmt.Errorf("--require: %q: criterion %q, want connect or traffic", o.Require, crit)
	}
	return fmt.Sprintf("%d:%s", n, crit), nil
}

// judgeTraffic checks pt's traffic phase against the run's SLOs. The
// references objectives are written against come from the completed
// traffic phases measured so far, pt's own among them, each count taken
// as its trials' median (slo.Median): base is the smallest count's, peak
// the best count's among those up to pt's. A phase that did not complete, or
// left clients unmeasured (result.Traffic.Unmeasured), misses its SLOs:
// its figures do not describe every client. Under criterion traffic the verdict decides the
// point (result.Traffic.Judged).
func judgeTraffic(pt *result.Point, prior []result.Point, slos []slo.SLO, criterion string) {
	t := pt.Traffic
	if t == nil {
		return
	}
	by := map[int][]slo.Figures{}
	for _, p := range append(prior, *pt) {
		if p.Traffic != nil && p.Traffic.Error == "" {
			by[p.Clients] = append(by[p.Clients], p.Traffic.Figures(p.Attempted-p.Connected))
		}
	}
	var refs slo.Refs
	var upTo []slo.Figures
	for _, n := range slices.Sorted(maps.Keys(by)) {
		m := slo.Median(by[n])
		if refs.Base == nil {
			refs.Base = &m
		}
		if n <= pt.Clients {
			upTo = append(upTo, m)
		}
	}
	if len(upTo) > 0 {
		best := slo.Best(upTo)
		refs.Peak = &best
	}
	t.SLO, t.SLOPassed = slo.CheckAll(slos, t.Figures(pt.Attempted-pt.Connected), refs)
	if u := t.UnmeasuredText(); u != "" {
		t.SLO = append(t.SLO, slo.Verdict{SLO: "every client measured", Text: u})
		t.SLOPassed = false
	}
	if t.Error != "" {
		t.SLOPassed = false
	}
	t.Judged = criterion == result.CriterionTraffic
}

// TargetRecord is what the run records of its target: the templates,
// and the SHA-256 of the programs they name as they are now.
func TargetRecord(spec runner.Spec, dirs []string, device, addr string) *result.Target {
	if spec.Server == nil && spec.Client == nil {
		return nil
	}
	t := &result.Target{Dirs: dirs, Device: device, Addr: addr, Binaries: map[string]string{}}
	var argvs [][]string
	if s := spec.Server; s != nil {
		t.Server, t.BuildCommand, t.Port, t.Ready = s.Argv, s.Build, s.Port, s.Ready
		argvs = append(argvs, s.Argv)
		if s.Addr != "" {
			t.Addr = s.Addr
		}
	}
	if c := spec.Client; c != nil {
		t.Client, t.ClientStdin, t.ClientOK, t.Counting = c.Argv, c.Stdin, c.OK, c.Counting()
		argvs = append(argvs, c.Argv)
	}
	progs, _ := command.Programs(argvs...)
	for _, p := range progs {
		if sum, err := command.FileSHA256(p); err == nil {
			t.Binaries[p] = sum
		}
	}
	if len(t.Binaries) == 0 {
		t.Binaries = nil
	}
	sort.Strings(t.Dirs)
	return t
}
