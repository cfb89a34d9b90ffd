package rungen

import (
	"math/rand/v2"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// The views test is only as strong as the runs it is fed: over as many
// seeds as it uses, the generator must produce every case its doc
// promises, and each run must be saved as the session saves one.
func TestRunCoversEveryCase(t *testing.T) {
	seen := map[string]int{}
	for seed := range 1000 {
		g := Run(rand.New(rand.NewPCG(uint64(seed), 1)))
		run := g.Run
		if run.Verdict == nil {
			t.Fatalf("seed %d: no verdict saved", seed)
		}
		if run.SchemaVersion != result.SchemaVersion {
			t.Fatalf("seed %d: schema %d, want %d", seed, run.SchemaVersion, result.SchemaVersion)
		}
		if (g.Cut == CutNone) != run.Complete {
			t.Fatalf("seed %d: cut %q but complete=%v", seed, g.Cut, run.Complete)
		}
		if g.Cut != CutNone {
			if run.Interrupted == nil || !run.Interrupted.Interrupted {
				t.Fatalf("seed %d: cut in %s without an interrupted point", seed, g.Cut)
			}
			for _, p := range run.Points {
				if p.Interrupted {
					t.Fatalf("seed %d: the interrupted point is among the counted points", seed)
				}
			}
		}
		seen["cut "+g.Cut]++
		if len(run.Config.Designs) > 1 {
			seen["designs"]++
			if len(run.Designs) == 0 {
				t.Fatalf("seed %d: %d designs without a design summary", seed, len(run.Config.Designs))
			}
		} else if run.Search == nil {
			t.Fatalf("seed %d: one design without a search", seed)
		}
		if g.Cap > 0 {
			seen["cap"]++
		}
		if g.Knee > 0 {
			seen["knee"]++
		}
		if run.Config.Traffic != nil {
			seen["traffic"]++
			if run.Config.SLO != "" {
				seen["slo"]++
			}
		}
		if run.Config.Require != "" {
			seen["require"]++
		}
		if run.Config.Trials > 1 {
			seen["trials"]++
		}
		if run.Search != nil && len(run.Search.NonMonotonic) > 0 {
			seen["non-monotonic"]++
		}
		for _, p := range run.Points {
			if p.Passed {
				seen["passed"]++
			} else {
				seen["failed"]++
			}
		}
	}
	for _, c := range []string{"cut ", "cut " + CutConnect, "cut " + CutTraffic, "cut " + CutHold,
		"designs", "cap", "knee", "traffic", "slo", "require", "trials", "non-monotonic", "passed", "failed"} {
		if seen[c] == 0 {
			t.Errorf("no run of 1,000 has %q", c)
		}
	}
	t.Logf("cases over 1,000 runs: %v", seen)
}
