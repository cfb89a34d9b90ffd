package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/probe"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// fakeRunner passes every point up to cap clients and fails the others,
// with a diagnosis, as a runner on a device with max_qp = cap would.
type fakeRunner struct {
	cap    int
	closed bool
	// saved is what run.json held on disk when each point started.
	saved []int
	path  func() string
	psn   uint32
}

func (f *fakeRunner) RunPoint(ctx context.Context, n, trial int) (result.Point, error) {
	if r, err := result.Load(f.path()); err == nil {
		f.saved = append(f.saved, len(r.Points))
	}
	pt := result.Point{Clients: n, Trial: trial, Limits: &result.Limits{}}
	for i := 0; i < n; i++ {
		rec := result.ClientRecord{ID: i, Outcome: result.OutcomeOK}
		if i >= f.cap {
			rec.Outcome = result.OutcomeQPCreate
		} else {
			f.psn++
			rec.LocalPSN, rec.RemotePSN = f.psn, f.psn
		}
		pt.Records = append(pt.Records, rec)
	}
	analysis.SummarisePoint(&pt, 1)
	if !pt.Passed {
		pt.Diagnosis = &result.Diagnosis{Limit: "device-cap:max_qp", Summary: "max_qp"}
	}
	return pt, nil
}

// watch observes the starts and the outcomes of points.
type watch struct {
	Quiet
	starts func(design string, n, trial int)
	point  func(result.Point)
}

func (w watch) PointStarts(design string, n, trial int) {
	if w.starts != nil {
		w.starts(design, n, trial)
	}
}

func (w watch) Point(pt result.Point) { w.point(pt) }

func (f *fakeRunner) Device() *result.DeviceInfo { return &result.DeviceInfo{Name: "fake0"} }
func (f *fakeRunner) Close() error               { f.closed = true; return nil }

func options(t *testing.T, f *fakeRunner, opened *int) Options {
	t.Helper()
	return Options{
		Mode: "ramp", Clients: []int{5, 10, 20}, ResultsDir: t.TempDir(),
		Backend: result.Backend{Name: "sim", Simulated: true},
		Spec:    runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: runner.DefaultMode, Fabric: protocol.Fabric{Backend: "sim", SimMaxQP: 10}},
		Trials:  1,
		Strategy: func(ctx context.Context, designs []string, cfg probe.Config, m probe.DesignMeasure, obs func(probe.Event)) ([]result.Search, []result.Point, error) {
			return probe.RampDesigns(ctx, designs, []int{5, 10, 20}, cfg, m, obs)
		},
		Open: func(ctx context.Context, spec runner.Spec, dir string, local runner.LocalOptions) (runner.Runner, error) {
			*opened++
			if len(local.Certs.Server.KeyPEM) == 0 || len(local.Certs.Client.CertPEM) == 0 {
				t.Errorf("runner opened without the run's certificate pairs")
			}
			return f, nil
		},
	}
}

func TestRunSavesEveryPointAndSummarises(t *testing.T) {
	f := &fakeRunner{cap: 10}
	var opened int
	o := options(t, f, &opened)
	var path string
	f.path = func() string { return path }
	var points []int
	o.Observer = watch{starts: func(_ string, n, trial int) {
		runs, _ := filepath.Glob(filepath.Join(o.ResultsDir, "*", result.FileName))
		if len(runs) == 1 {
			path = runs[0]
		}
	}, point: func(pt result.Point) { points = append(points, pt.Clients) }}
	s, err := Run(context.Background(), o)
	if err != nil || s.Err != nil {
		t.Fatalf("run: %v, probe: %v", err, s.Err)
	}
	if opened != 1 || !f.closed {
		t.Errorf("runner opened %d times, closed %v; want once, closed", opened, f.closed)
	}
	if len(f.saved) != 3 || f.saved[0] != 0 || f.saved[1] != 1 || f.saved[2] != 2 {
		t.Errorf("points on disk as each point started: %v, want 0, 1, 2", f.saved)
	}
	if len(points) != 3 {
		t.Errorf("told about points %v", points)
	}
	r, err := result.Load(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Complete || len(r.Points) != 3 || r.Search.Capacity != 10 || r.Search.FirstFail != 20 {
		t.Errorf("run: complete %v, %d points, search %+v", r.Complete, len(r.Points), r.Search)
	}
	if r.Diagnosis == nil || r.Diagnosis.Limit != "device-cap:max_qp" || r.Limits == nil {
		t.Errorf("diagnosis %+v, limits %+v: want both lifted to the run", r.Diagnosis, r.Limits)
	}
	if !r.PSN.Unique || r.PSN.Connections != 25 {
		t.Errorf("PSN check %+v, want 25 unique connections", r.PSN)
	}
	if r.Environment.Device == nil || r.Environment.Device.Name != "fake0" {
		t.Errorf("device %+v", r.Environment.Device)
	}
	if r.Config.SimCaps == nil || r.Config.SimCaps.MaxQP != 10 || r.Config.ResourceMode != runner.DefaultMode {
		t.Errorf("config %+v", r.Config)
	}
}

// An interrupted run keeps the points completed, says so, and returns
// the interruption as the probe's error, not as a failure to save.
func TestRunInterrupted(t *testing.T) {
	f := &fakeRunner{cap: 100}
	var opened int
	o := options(t, f, &opened)
	ctx, cancel := context.WithCancel(context.Background())
	o.Observer = watch{point: func(pt result.Point) { cancel() }}
	f.path = func() string { return "" }
	s, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(s.Err, context.Canceled) {
		t.Fatalf("probe error %v, want context.Canceled", s.Err)
	}
	r, err := result.Load(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Complete || r.Error != "interrupted" || len(r.Points) != 1 {
		t.Errorf("run: complete %v, error %q, %d points", r.Complete, r.Error, len(r.Points))
	}
}

func TestCheck(t *testing.T) {
	ok := runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: runner.DefaultMode}
	for _, tc := range []struct {
		o    Options
		fail bool
	}{
		{Options{Spec: ok, Trials: 1}, false},
		{Options{Spec: ok, Trials: 0}, true},
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1.5, Procs: 1, Mode: runner.DefaultMode}, Trials: 1}, true},
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: "weird"}, Trials: 1}, true},
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 0, Mode: runner.DefaultMode}, Trials: 1}, true},
		// --mux holds for the list's mux design and is ignored by the
		// others; a list without mux refuses it, as one design does.
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: runner.DefaultMode, Mux: 10}, Designs: []string{runner.DefaultMode, runner.ModeMux}, Trials: 1}, false},
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: runner.DefaultMode, Mux: 10}, Designs: []string{runner.DefaultMode, "srq"}, Trials: 1}, true},
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: runner.DefaultMode, Mux: 10}, Trials: 1}, true},
		// --srq-depth needs an SRQ: srq mode, alone or in the list.
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: "srq", SRQDepth: 4}, Trials: 1}, false},
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: runner.DefaultMode, SRQDepth: 4}, Designs: []string{runner.DefaultMode, "srq"}, Trials: 1}, false},
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: runner.DefaultMode, SRQDepth: 4}, Trials: 1}, true},
		{Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: "srq", SRQDepth: -1}, Trials: 1}, true},
	} {
		if err := tc.o.Check(); (err != nil) != tc.fail {
			t.Errorf("Check(%+v) = %v, want failure %v", tc.o, err, tc.fail)
		}
	}
}

// --criterion and --require are checked where the run reads them: a
// criterion that judges a traffic phase the points do not run is refused
// with why none runs, and --require N takes --criterion's.
func TestCheckCriterion(t *testing.T) {
	traffic := client.TrafficConfig{Duration: time.Second, Depth: 1}
	cm := runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: runner.DefaultMode, Server: &protocol.ServerCommand{Argv: []string{"cmcapserver"}},
		CM: &protocol.CMClient{}, Traffic: traffic}
	for _, tc := range []struct {
		name, criterion, require string
		spec                     func(*runner.Spec)
		want                     string // "" = passes
	}{
		{"connect", "", "", nil, ""},
		{"unknown", "fast", "", nil, `--criterion "fast": want connect or traffic`},
		{"traffic", result.CriterionTraffic, "", nil, ""},
		{"no phase", result.CriterionTraffic, "", func(s *runner.Spec) { s.Traffic = client.TrafficConfig{} }, "--criterion traffic needs a traffic phase: --traffic is 0"},
		{"client command", result.CriterionTraffic, "", func(s *runner.Spec) { s.Client = &protocol.ClientCommand{Argv: []string{"x"}} }, "the clients are --client-cmd's"},
		{"require's own", "", "10:traffic", func(s *runner.Spec) { s.Traffic = client.TrafficConfig{} }, "--require 10:traffic needs a traffic phase"},
		{"require takes the criterion", result.CriterionTraffic, "10", func(s *runner.Spec) { s.Traffic = client.TrafficConfig{} }, "needs a traffic phase"},
		{"require connect", result.CriterionConnect, "1_000", func(s *runner.Spec) { s.Traffic = client.TrafficConfig{} }, ""},
		{"require count", "", "x", nil, `--require: "x": want a client count`},
		{"require criterion", "", "10:fast", nil, `criterion "fast"`},
		{"rdma_cm without echoes", result.CriterionTraffic, "", func(s *runner.Spec) { *s = cm }, "rdma_cm clients (--client-kind rdmacm) run no traffic phase unless the server echoes (--cm-server-echoes)"},
		{"rdma_cm echoes", result.CriterionTraffic, "", func(s *runner.Spec) { *s = cm; s.CM = &protocol.CMClient{ServerEchoes: true} }, ""},
	} {
		o := Options{Spec: runner.Spec{Rounds: 1, Timeout: time.Second, MsgSize: 64, Threshold: 1, Procs: 1, Mode: runner.DefaultMode, Traffic: traffic}, Trials: 1,
			Criterion: tc.criterion, Require: tc.require}
		if tc.spec != nil {
			tc.spec(&o.Spec)
		}
		err := o.Check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	o := Options{Criterion: result.CriterionTraffic, Require: "1_000"}
	if r, err := o.require(); r != "1000:traffic" || err != nil {
		t.Errorf("--require 1_000 --criterion traffic is recorded as %q (%v)", r, err)
	}
}

// A run whose runner cannot open leaves no run directory behind, unless
// the runner wrote there (a guest's console log from a failed boot):
// then run.json says why the run never started, with no points.
func TestRunThatCannotStart(t *testing.T) {
	f := &fakeRunner{cap: 10}
	var opened int
	o := options(t, f, &opened)
	why := errors.New("this rdmaprobe has no verbs fabric")
	o.Open = func(ctx context.Context, spec runner.Spec, dir string, local runner.LocalOptions) (runner.Runner, error) {
		return nil, why
	}
	s, err := Run(context.Background(), o)
	if !errors.Is(err, why) || s != nil {
		t.Fatalf("Run = %v, %v; want nil and the runner's error", s, err)
	}
	if ents, _ := os.ReadDir(o.ResultsDir); len(ents) != 0 {
		t.Errorf("a run that never started left %d entries in the results directory", len(ents))
	}

	o.ResultsDir = t.TempDir()
	o.Open = func(ctx context.Context, spec runner.Spec, dir string, local runner.LocalOptions) (runner.Runner, error) {
		os.WriteFile(filepath.Join(dir, "guest-console.log"), []byte("Kernel panic\n"), 0o644)
		return nil, errors.New("guest not ready after 1m0s")
	}
	_, err = Run(context.Background(), o)
	runs, _ := filepath.Glob(filepath.Join(o.ResultsDir, "*", result.FileName))
	if err == nil || len(runs) != 1 || !strings.Contains(err.Error(), runs[0]) {
		t.Fatalf("error %v, runs %v: want the error to name the one run.json", err, runs)
	}
	r, err := result.Load(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != result.NotStarted+"guest not ready after 1m0s" || len(r.Points) != 0 || r.Complete {
		t.Errorf("run: error %q, %d points, complete %v", r.Error, len(r.Points), r.Complete)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(runs[0]), "guest-console.log")); err != nil {
		t.Errorf("console log: %v", err)
	}
}

// cutRunner measures points normally until cutAt clients, where the
// point is cut short as Ctrl-C cuts it: the outcomes so far, marked
// interrupted, with the context's error.
type cutRunner struct {
	fakeRunner
	cutAt  int
	cancel context.CancelFunc
}

func (c *cutRunner) RunPoint(ctx context.Context, n, trial int) (result.Point, error) {
	if n != c.cutAt {
		return c.fakeRunner.RunPoint(ctx, n, trial)
	}
	c.cancel()
	pt := result.Point{Clients: n, Trial: trial, Interrupted: true, Error: runner.Interrupted,
		Records: []result.ClientRecord{{ID: 0, Outcome: result.OutcomeOK, LocalPSN: 900, RemotePSN: 900}}}
	analysis.SummarisePoint(&pt, 1)
	return pt, ctx.Err()
}

// A point cut short is saved apart from the points, told to the caller,
// and counts as no measurement: the search's bracket, the diagnosis and
// the verdict stand on the completed points alone.
func TestRunKeepsThePointCutShort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &cutRunner{fakeRunner: fakeRunner{cap: 100, path: func() string { return "" }}, cutAt: 20, cancel: cancel}
	var opened int
	o := options(t, &f.fakeRunner, &opened)
	o.Open = func(context.Context, runner.Spec, string, runner.LocalOptions) (runner.Runner, error) { return f, nil }
	var told []result.Point
	o.Observer = watch{point: func(pt result.Point) { told = append(told, pt) }}
	s, err := Run(ctx, o)
	if err != nil || !errors.Is(s.Err, context.Canceled) {
		t.Fatalf("run: %v, probe: %v", err, s.Err)
	}
	r, err := result.Load(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Interrupted
	if len(r.Points) != 2 || p == nil || !p.Interrupted || p.Clients != 20 || p.Connected != 1 {
		t.Fatalf("points %d, interrupted %+v: want 5 and 10 measured, 20 kept apart", len(r.Points), p)
	}
	if len(told) != 3 || !told[2].Interrupted {
		t.Errorf("told about %d points, the last interrupted %v", len(told), len(told) == 3 && told[2].Interrupted)
	}
	if r.Search.Capacity != 10 || r.Search.FirstFail != 0 || r.Diagnosis != nil || r.Verdict == nil || r.Verdict.Interrupted != 20 {
		t.Errorf("search %+v, diagnosis %+v, verdict %+v: the point cut short counted", r.Search, r.Diagnosis, r.Verdict)
	}
	if r.PSN.Connections != 16 {
		t.Errorf("PSN check counted %d connections, want 15 measured + 1 of the point cut short", r.PSN.Connections)
	}
}

// lateCutRunner is cancelled while its point at cutAt runs, after every
// client connected (a traffic phase or the hold until release), and
// returns the point whole, unmarked, as a runner that marks only a cut
// connect phase would.
type lateCutRunner struct {
	fakeRunner
	cutAt  int
	cancel context.CancelFunc
}

func (c *lateCutRunner) RunPoint(ctx context.Context, n, trial int) (result.Point, error) {
	pt, err := c.fakeRunner.RunPoint(ctx, n, trial)
	if n == c.cutAt {
		c.cancel()
	}
	return pt, err
}

// A point the run was cancelled under is the run's interrupted point
// whatever its phase: every client connected, yet it counts nowhere.
func TestRunKeepsAPointCutAfterConnectApart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &lateCutRunner{fakeRunner: fakeRunner{cap: 100, path: func() string { return "" }}, cutAt: 20, cancel: cancel}
	var opened int
	o := options(t, &f.fakeRunner, &opened)
	o.Open = func(context.Context, runner.Spec, string, runner.LocalOptions) (runner.Runner, error) { return f, nil }
	s, err := Run(ctx, o)
	if err != nil || !errors.Is(s.Err, context.Canceled) {
		t.Fatalf("run: %v, probe: %v", err, s.Err)
	}
	r, err := result.Load(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Interrupted
	if len(r.Points) != 2 || p == nil || !p.Interrupted || p.Passed || p.Clients != 20 || p.Connected != 20 {
		t.Fatalf("points %d, interrupted %+v: want 5 and 10 measured, 20 kept apart", len(r.Points), p)
	}
	if r.Search.Capacity != 10 {
		t.Errorf("search %+v: the point cut short counted", r.Search)
	}
}

// finishingRunner is a fakeRunner that is a Finisher and a Describer:
// Finish adds a data-path reference measured after the points.
type finishingRunner struct {
	fakeRunner
	finished int
	points   int // points run when Finish was called
}

func (f *finishingRunner) RunPoint(ctx context.Context, n, trial int) (result.Point, error) {
	f.points++
	return f.fakeRunner.RunPoint(ctx, n, trial)
}

func (f *finishingRunner) Finish(ctx context.Context) { f.finished = f.points }

func (f *finishingRunner) Describe(run *result.Run) {
	run.Environment.DataPath = []result.Reference{{Tool: "ib_send_lat", When: result.ReferenceBefore}}
	if f.finished > 0 {
		run.Environment.DataPath = append(run.Environment.DataPath, result.Reference{Tool: "ib_send_lat", When: result.ReferenceAfter})
	}
}

// TestRunFinishes: a Finisher runs once after the last point, and what it
// adds is in the saved run; an interrupted run does not finish.
func TestRunFinishes(t *testing.T) {
	for _, interrupt := range []bool{false, true} {
		f := &finishingRunner{fakeRunner: fakeRunner{cap: 100}}
		f.path = func() string { return "" }
		var opened int
		o := options(t, &f.fakeRunner, &opened)
		o.Open = func(ctx context.Context, spec runner.Spec, dir string, local runner.LocalOptions) (runner.Runner, error) {
			return f, nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		if interrupt {
			o.Observer = watch{point: func(pt result.Point) { cancel() }}
		}
		s, err := Run(ctx, o)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		r, err := result.Load(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case interrupt && (f.finished != 0 || len(r.Environment.DataPath) != 1):
			t.Errorf("interrupted: finished after %d points, references %+v", f.finished, r.Environment.DataPath)
		case !interrupt && (f.finished != 3 || len(r.Environment.DataPath) != 2 || r.Environment.DataPath[1].When != result.ReferenceAfter):
			t.Errorf("finished after %d points (want 3), references %+v", f.finished, r.Environment.DataPath)
		}
	}
}

// modeRunner is a fakeRunner whose server design the session sets.
type modeRunner struct {
	fakeRunner
	mode string
	seen []string
}

func (m *modeRunner) SetMode(mode string) { m.mode = mode }

func (m *modeRunner) RunPoint(ctx context.Context, n, trial int) (result.Point, error) {
	m.seen = append(m.seen, m.mode+" "+strconv.Itoa(n))
	return m.fakeRunner.RunPoint(ctx, n, trial)
}

// A ramp over two designs sets the runner's design before each point,
// in turns at each count, and saves each design's findings.
func TestRunMeasuresDesignsInTurns(t *testing.T) {
	m := &modeRunner{fakeRunner: fakeRunner{cap: 10, path: func() string { return "" }}}
	var opened int
	o := options(t, &m.fakeRunner, &opened)
	o.Designs = []string{"per-client", "srq"}
	o.Open = func(ctx context.Context, spec runner.Spec, dir string, local runner.LocalOptions) (runner.Runner, error) {
		return m, nil
	}
	s, err := Run(context.Background(), o)
	if err != nil || s.Err != nil {
		t.Fatalf("run: %v, probe: %v", err, s.Err)
	}
	want := []string{"per-client 5", "srq 5", "per-client 10", "srq 10", "per-client 20", "srq 20"}
	if !slices.Equal(m.seen, want) {
		t.Errorf("the runner ran %v, want %v", m.seen, want)
	}
	r, err := result.Load(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range r.Points {
		if got := p.Design + " " + strconv.Itoa(p.Clients); got != want[i] {
			t.Errorf("point %d is %s, want %s", i, got, want[i])
		}
	}
	if r.Search != nil || len(r.Designs) != 2 || r.Designs[1].Mode != "srq" || r.Designs[1].MaxConnected != 10 ||
		r.Designs[1].Diagnosis == nil || r.Designs[1].LimitAt != 20 || r.Config.ResourceMode != "per-client,srq" {
		t.Errorf("search %+v, designs %+v, mode %q", r.Search, r.Designs, r.Config.ResourceMode)
	}
}

// A runner that cannot change the server's design between points cannot
// run several.
func TestRunRefusesDesignsARunnerCannotSet(t *testing.T) {
	f := &fakeRunner{cap: 10, path: func() string { return "" }}
	var opened int
	o := options(t, f, &opened)
	o.Designs = []string{"per-client", "srq"}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "cannot change the server's design") {
		t.Fatalf("error %v", err)
	}
}

// The run records its target's templates and the SHA-256 of each
// program they name; a run of rdmaprobe's own server and clients has
// none.
func TestTargetRecord(t *testing.T) {
	if r := TargetRecord(runner.Spec{}, nil, "", ""); r != nil {
		t.Errorf("no commands: %+v", r)
	}
	spec := runner.Spec{Server: &protocol.ServerCommand{Argv: []string{"true", "{port}"}, Addr: "192.0.2.9"},
		Client: &protocol.ClientCommand{Argv: []string{"{build}/client"}}}
	r := TargetRecord(spec, []string{"/b", "/a"}, "rxe1", "192.0.2.1")
	if r == nil || r.Addr != "192.0.2.9" || r.Device != "rxe1" || !slices.Equal(r.Dirs, []string{"/a", "/b"}) || len(r.Binaries) != 1 {
		t.Fatalf("record %+v", r)
	}
	for p, sum := range r.Binaries {
		if filepath.Base(p) != "true" || len(sum) != 64 {
			t.Errorf("binary %s: %s", p, sum)
		}
	}
}
