package analysis

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// A point cut short is not a failed count: a run whose points passed
// up to 200 and whose 2000-client point was interrupted at 1,392
// connected has capacity 200, no first failure and no limiting factor.
func TestCutShortIsNoMeasurement(t *testing.T) {
	pass := result.Point{Clients: 200, Trial: 1, Attempted: 200, Connected: 200, Outcomes: map[string]int{"ok": 200}}
	Judge(&pass, 1)
	cut := result.Point{Clients: 2000, Trial: 1, Attempted: 1400, Connected: 1392, Interrupted: true, Error: "interrupted",
		Outcomes: map[string]int{"ok": 1392, "timeout": 8}}
	Judge(&cut, 1)
	run := &result.Run{Config: result.Config{Threshold: 1}, Points: []result.Point{pass}, Interrupted: &cut}
	f := Analyse(run)
	if f.Capacity != 200 || f.FirstFail != 0 || f.FirstShort != 0 || f.Limit != nil || len(f.Counts) != 1 {
		t.Errorf("findings %+v: want capacity 200, no failure, one count", f)
	}
	got := CutShort(cut)
	for _, want := range []string{"2,000 clients was cut short (interrupted) after 1,400 of them had an outcome, 1,392 connected", "no verdict counts it"} {
		if !strings.Contains(got, want) {
			t.Errorf("CutShort = %q, lacks %q", got, want)
		}
	}
}
