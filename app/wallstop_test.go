package app

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Past the device's max_qp every client is refused; with --wall-stop the
// generators stop launching once the point has failed and that many were
// refused in a row. The rest are counted unlaunched, the success rate is
// still over every client asked for, and the diagnosis still names the
// wall. --wall-stop 0 launches every client.
func TestWallStopEndsAPointAtItsWall(t *testing.T) {
	for _, c := range []struct {
		stop       string
		unlaunched bool
	}{{"100", true}, {"0", false}} {
		t.Run("wall-stop "+c.stop, func(t *testing.T) {
			root := t.TempDir()
			out, errOut, code := run(t, udArgs(root, "--clients", "2000", "--sim-max-qp", "300", "--procs", "2",
				"--traffic", "0", "--wall-stop", c.stop)...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			r := loadOnlyRun(t, root)
			p := r.Points[0]
			if p.Connected != 300 || p.Passed || p.Attempted != 2000 {
				t.Fatalf("connected %d of %d attempted, passed %v; outcomes %v", p.Connected, p.Attempted, p.Passed, p.Outcomes)
			}
			if got := len(p.Records) + p.Unlaunched; got != 2000 {
				t.Errorf("%d records + %d unlaunched = %d, want 2000", len(p.Records), p.Unlaunched, got)
			}
			if p.Outcomes[result.OutcomeUnlaunched] != p.Unlaunched {
				t.Errorf("outcomes %v, unlaunched %d", p.Outcomes, p.Unlaunched)
			}
			if c.unlaunched {
				// Each generator stops after 100 refused in a row, with its
				// in-flight window's attempts ending after that.
				if p.Unlaunched == 0 || p.SuccessRate != 0.15 {
					t.Errorf("unlaunched %d, success rate %g (want 300/2000)", p.Unlaunched, p.SuccessRate)
				}
				if !strings.Contains(out, "unlaunched") {
					t.Errorf("the point's line does not say unlaunched:\n%s", out)
				}
			} else if p.Unlaunched != 0 {
				t.Errorf("--wall-stop 0 left %d unlaunched", p.Unlaunched)
			}
			if r.Config.WallStop != map[bool]int{true: 100, false: 0}[c.unlaunched] {
				t.Errorf("config.wall_stop %d", r.Config.WallStop)
			}
			if d := p.Diagnosis; d == nil || !strings.Contains(d.Limit, "max_qp") {
				t.Errorf("diagnosis %+v, want the device's max_qp", p.Diagnosis)
			}
		})
	}
}
