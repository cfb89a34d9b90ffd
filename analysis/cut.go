package analysis

import (
	"fmt"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// CutShort says in one sentence what a point cut short (Ctrl-C, a dead
// guest; result.Point.Interrupted) measured before it stopped, and that
// it is no measurement of its client count: no verdict, capacity or
// count here includes it, since the clients that had no outcome might
// all have connected, or none.
func CutShort(p result.Point) string {
	why := p.Error
	if why == "" {
		why = "interrupted"
	}
	trial := ""
	if p.Trial > 1 {
		trial = fmt.Sprintf(" (trial %d)", p.Trial)
	}
	return fmt.Sprintf("The point at %s clients%s was cut short (%s) after %s of them had an outcome, %s connected: not a measurement of %s clients, so no verdict counts it.",
		Thousands(p.Clients), trial, why, Thousands(p.Attempted), Thousands(p.Connected), Thousands(p.Clients))
}
