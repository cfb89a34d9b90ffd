package child

import (
	"reflect"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// The tally counts failures by class and every record's phases by
// bucket, and hands out copies the caller may keep.
func TestTally(t *testing.T) {
	var nilTally *tally
	if nilTally.counts() != nil || nilTally.phaseCounts() != nil {
		t.Error("a nil tally counted something")
	}
	var tl tally
	tl.add(&result.ClientRecord{Outcome: result.OutcomeOK, PhasesUS: map[string]int64{result.PhaseTCP: 50, result.PhaseTLS: 150}})
	tl.add(&result.ClientRecord{Outcome: result.OutcomeTimeout, PhasesUS: map[string]int64{result.PhaseTCP: 90}})
	tl.add(&result.ClientRecord{Outcome: result.OutcomeTimeout})
	tl.add(&result.ClientRecord{Outcome: result.OutcomeRefused})
	if got, want := tl.counts(), map[string]int{result.OutcomeTimeout: 2, result.OutcomeRefused: 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("failures %v, want %v", got, want)
	}
	ph := tl.phaseCounts()
	if len(ph) != 2 || len(ph[result.PhaseTCP]) != len(result.PhaseBounds)+1 {
		t.Fatalf("phases %v", ph)
	}
	if ph[result.PhaseTCP][0] != 2 || ph[result.PhaseTLS][1] != 1 {
		t.Errorf("tcp %v tls %v: want 2 tcp phases in the first bucket, the tls one in the second", ph[result.PhaseTCP], ph[result.PhaseTLS])
	}
	ph[result.PhaseTCP][0] = 99
	tl.counts()[result.OutcomeTimeout] = 99
	if tl.phaseCounts()[result.PhaseTCP][0] != 2 || tl.counts()[result.OutcomeTimeout] != 2 {
		t.Error("a copy handed out changed the tally")
	}
}

func TestFailureList(t *testing.T) {
	if got := failureList(nil); got != "" {
		t.Errorf("no failures: %q", got)
	}
	if got, want := failureList(map[string]int{"tls": 2, "exchange": 1}), "; failures: exchange 1, tls 2"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
