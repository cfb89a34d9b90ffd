package probe

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Staircase notes (result.Step.Note): a step of the climb, and the fresh
// point that confirms where it stopped.
const (
	NoteStair   = "staircase: cumulative"
	NoteConfirm = "confirm: fresh point"
)

// Stair is how a staircase reaches its clients: Climb adds clients on
// top of those held since the last Climb of design until n are asked
// for (the first sizes the server for top) and returns the step, and
// Descend releases every client held and stops the server
// (runner.Climber).
type Stair struct {
	Climb   func(ctx context.Context, design string, n, top int) (result.Point, error)
	Descend func(design string) error
}

// CheckSteps refuses a staircase's steps that do not climb: each is a
// cumulative total, so each must be larger than the last.
func CheckSteps(steps []int) error {
	if len(steps) == 0 {
		return errors.New("no steps given")
	}
	for i, n := range steps {
		if n < 1 {
			return fmt.Errorf("step %d: need at least 1 client", n)
		}
		if i > 0 && n <= steps[i-1] {
			return fmt.Errorf("steps are the clients held after each, so they must increase: %d after %d", n, steps[i-1])
		}
	}
	return nil
}

// Staircase climbs each design's staircase in turn (each with a fresh
// server): every step adds clients on top of those held and is recorded
// as a step (result.Point.Cumulative), until the first step that fails
// (a client refused or failed beyond the threshold, a point error, or
// its traffic phase's SLOs under criterion traffic) or the last step.
// Then everything is released, and one fresh point (m) at the count
// the climb reached confirms it: the clients held at once when the
// first failing step came (the wall), or the last step's count. A step
// that passed with N clients held at once is evidence that N can be
// held, and counts so for the capacity; the fresh point is the
// measurement of its count, and a step at the same count gives way to
// it. A staircase is one pass: cfg.Trials must be 1.
func Staircase(ctx context.Context, designs []string, steps []int, cfg Config, stair Stair, m DesignMeasure, observe func(Event)) ([]result.Search, []result.Point, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if cfg.Trials > 1 {
		return nil, nil, fmt.Errorf("a staircase is one pass: %d trials per count cannot be climbed", cfg.Trials)
	}
	if err := checkDesigns(designs); err != nil {
		return nil, nil, err
	}
	if err := CheckSteps(steps); err != nil {
		return nil, nil, err
	}
	var all []result.Point
	var out []result.Search
	for _, d := range designs {
		p := designProber(ctx, cfg, d, len(designs) > 1, m, observe, &all)
		err = p.climb(steps, func(ctx context.Context, n, top int) (result.Point, error) {
			pt, err := stair.Climb(ctx, d, n, top)
			pt.Design = d
			return pt, err
		}, func() error { return stair.Descend(d) })
		out = append(out, p.finish(0, 0, err))
		if err != nil {
			break
		}
	}
	return out, all, err
}

// climb climbs steps, descends, and confirms where the climb stopped
// with a fresh point (Staircase).
func (p *prober) climb(steps []int, climb func(ctx context.Context, n, top int) (result.Point, error), descend func() error) error {
	top := steps[len(steps)-1]
	var failed *result.Point
	var err error
	for i, n := range steps {
		why := "listed: the first step"
		if i > 0 {
			why = fmt.Sprintf("listed: %s more on top of the %s held", analysis.Thousands(n-steps[i-1]), analysis.Thousands(p.points[len(p.points)-1].Connected))
		}
		if err = p.climbStep(n, top, why, climb); err != nil {
			break
		}
		if pt := p.points[len(p.points)-1]; !pt.Passed {
			failed = &pt
			break
		}
	}
	if derr := descend(); err == nil && derr != nil {
		err = fmt.Errorf("descend: %w", derr)
	}
	if err != nil {
		return err
	}
	wall, why := top, fmt.Sprintf("every step held: confirm the top, %s, with a fresh point", analysis.Thousands(top))
	if failed != nil {
		ev := readEvidence([]result.Point{*failed})
		cause := ev.cause
		if cause == "" {
			cause = ev.why
		}
		wall = failed.Connected
		why = fmt.Sprintf("the step to %s held %s at once (%s): confirm %s with a fresh point",
			analysis.Thousands(failed.Clients), analysis.Thousands(wall), cause, analysis.Thousands(wall))
		p.notef("The staircase stopped at its step to %s clients, with %s held at once (%s).",
			analysis.Thousands(failed.Clients), analysis.Thousands(wall), cause)
	}
	if wall < 1 {
		p.notef("The first step held no client: there is no count to confirm.")
		return nil
	}
	// The fresh point is the measurement of its count: a step there
	// gives way to it (analysis.Pool does the same).
	delete(p.tallies, wall)
	return p.step(wall, NoteConfirm, why)
}

// climbStep takes one step of the climb and records it as a Step of its
// own.
func (p *prober) climbStep(n, top int, why string, climb func(ctx context.Context, n, top int) (result.Point, error)) error {
	p.observe(Event{Kind: EventDecision, Step: &result.Step{Clients: n, Note: NoteStair, Reason: why}, Note: why})
	if err := p.ctx.Err(); err != nil {
		return err
	}
	pt, err := climb(p.ctx, n, top)
	if err != nil {
		if ctxErr := p.ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("climb to %d clients: %w", n, err)
	}
	pt.Clients, pt.Trial, pt.Cumulative = n, 1, true
	analysis.Judge(&pt, p.cfg.Threshold)
	p.points = append(p.points, pt)
	t := &tally{}
	p.tallies[n] = t
	t.add(pt)
	p.observe(Event{Kind: EventPoint, Point: &pt})
	s := result.Step{Clients: n, Trials: 1, Passed: t.passed(p.cfg.Threshold), Rate: t.rate(), Note: NoteStair, Reason: why}
	p.steps = append(p.steps, s)
	p.observe(Event{Kind: EventStep, Step: &s})
	if pt.Error != "" && p.cfg.StopOnPointError {
		return fmt.Errorf("%w at %d clients (step): %s", ErrPointFailed, n, pt.Error)
	}
	return nil
}
