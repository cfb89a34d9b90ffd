package progress

import (
	"fmt"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"

	"github.com/rdmaprobe/rdmaprobe/runner"
)

// phase is one phase's figures (or one generator host's in the connect
// phase), read by its bar as it is drawn and by the plain line.
type phase struct {
	name    string
	kind    kind
	started time.Time
	window  time.Duration // a traffic phase's
	bar     *mpb.Bar      // nil off a terminal

	mu              sync.Mutex
	ended           time.Time // zero while it runs
	total, done, ok int
	msgs            int64
	sec             float64
}

type kind int

const (
	spinner kind = iota // no count: the boot, a calibration, the start
	counted             // clients done of the total: connect, a host
	traffic             // the window's time and the messages
)

// kindOf is the kind of the point's phase named.
func kindOf(name string) kind {
	switch name {
	case runner.PhaseTraffic:
		return traffic
	case runner.PhaseConnect:
		return counted
	}
	return spinner
}

// figures are where the phase is at now: its counts, rate, time and,
// while it runs, the time left at that rate.
func (ph *phase) figures(now time.Time) []string {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	if !ph.ended.IsZero() {
		now = ph.ended
	}
	elapsed := now.Sub(ph.started)
	switch ph.kind {
	case spinner:
		return []string{span(elapsed)}
	case traffic:
		out := []string{span(elapsed)}
		if ph.window > 0 {
			out[0] += " of " + span(ph.window)
		}
		rate := 0.0
		if ph.sec > 0 {
			rate = float64(ph.msgs) / ph.sec
		}
		return append(out, fmt.Sprintf("%.0f msg/s", rate))
	}
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(ph.done) / s
	}
	out := []string{fmt.Sprintf("%d/%d", ph.done, ph.total), fmt.Sprintf("%d ok", ph.ok), fmt.Sprintf("%.1f/s", rate), span(elapsed)}
	if ph.ended.IsZero() && ph.name == runner.PhaseConnect && rate > 0 && ph.done < ph.total {
		out = append(out, "ETA "+span(time.Duration(float64(ph.total-ph.done)/rate*float64(time.Second))))
	}
	return out
}

// span is a duration to the second: 3s, 1m40s.
func span(d time.Duration) string {
	return d.Round(time.Second).String()
}
