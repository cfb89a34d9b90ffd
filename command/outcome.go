package command

import (
	"context"
	"errors"
	"time"
)

// Class is how one client command ended.
type Class string

const (
	// OK: exit status 0 and, when an ok pattern is given, a line that
	// matched it.
	OK Class = "ok"
	// ExitStatus: it exited with a status other than 0.
	ExitStatus Class = "exit"
	// Signaled: a signal ended it (not the harness's deadline).
	Signaled Class = "signal"
	// Timeout: the per-client deadline passed and the harness killed it.
	Timeout Class = "timeout"
	// Mismatch: exit status 0, but no line matched the ok pattern.
	Mismatch Class = "output-mismatch"
	// StartFailed: it could not be started (see Outcome.HarnessLimit).
	StartFailed Class = "start"
)

// Outcome is what one client command did, as recorded.
type Outcome struct {
	Class Class `json:"class"`
	// ExitCode is the exit status (-1 after a signal or when not
	// started).
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// Errno names the failed start's errno, or an errno found in the
	// output of a client that failed.
	Errno string `json:"errno,omitempty"`
	// HarnessLimit marks a start that failed for lack of the harness's
	// own resources: it says nothing about the server.
	HarnessLimit bool `json:"harness_limit,omitempty"`
	// Error is the start error.
	Error string `json:"error,omitempty"`
	// OKAfter is from spawn to the matching line (the only phase timing a
	// command client gives), 0 without one.
	OKAfter time.Duration `json:"ok_after_ns,omitempty"`
	// Duration is from spawn to exit.
	Duration time.Duration `json:"duration_ns"`
	// Tail is the end of its output, kept for failed clients only.
	Tail string `json:"tail,omitempty"`
	// OutputBytes is how much it wrote.
	OutputBytes int64 `json:"output_bytes,omitempty"`
}

// Failed reports whether the outcome is not OK.
func (o Outcome) Failed() bool { return o.Class != OK }

// Classify turns a client's end into an Outcome. waitErr is what Wait
// returned (a context error when the deadline ended it); requireMatch
// says an ok pattern was given.
func Classify(p *Proc, waitErr error, requireMatch bool) Outcome {
	e := p.Exit()
	o := Outcome{ExitCode: e.Code, Signal: e.Signal, Duration: e.Duration, OutputBytes: p.OutputBytes()}
	_, after, matched := p.Match()
	if matched {
		o.OKAfter = after
	}
	switch {
	case errors.Is(waitErr, context.DeadlineExceeded) || errors.Is(waitErr, context.Canceled):
		o.Class = Timeout
	case e.Signal != "":
		o.Class = Signaled
	case e.Code != 0:
		o.Class = ExitStatus
	case requireMatch && !matched:
		o.Class = Mismatch
	default:
		o.Class = OK
	}
	if o.Class != OK {
		o.Tail = p.Tail()
		if names := Errnos(o.Tail); len(names) > 0 {
			o.Errno = names[len(names)-1]
		}
	}
	return o
}

// TimedOut records a client whose deadline passed before it ended; p
// may still be dying (Kill), its output read so far.
func TimedOut(p *Proc) Outcome {
	o := Outcome{Class: Timeout, ExitCode: -1, Duration: time.Since(p.Started), OutputBytes: p.OutputBytes(), Tail: p.Tail()}
	if _, after, ok := p.Match(); ok {
		o.OKAfter = after
	}
	if names := Errnos(o.Tail); len(names) > 0 {
		o.Errno = names[len(names)-1]
	}
	return o
}

// StartOutcome records a client that could not be started.
func StartOutcome(err error) Outcome {
	o := Outcome{Class: StartFailed, ExitCode: -1, Error: err.Error()}
	var se *StartError
	if errors.As(err, &se) {
		o.HarnessLimit = se.HarnessLimit()
		o.Errno = se.Errno()
	}
	return o
}
