package bench

import (
	"math"
	"os"
	"strings"
	"testing"
)

// A real cmtime (rdmacm-utils 44) client's output at 1,000 connections
// in the Soft-RoCE guest: every step row is read, and the full connect
// is the sum of the five connect steps' totals.
func TestParseCMTime(t *testing.T) {
	b, err := os.ReadFile("testdata/cmtime-v44-1000.txt")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := ParseCMTime(string(b))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range steps {
		names[s.Name] = true
		if s.TotalMS < 0 || s.MaxMS < 0 || s.MinUS < 0 || s.PerConnUS < 0 {
			t.Errorf("step %+v: negative figure", s)
		}
	}
	for _, want := range append(CMTimeConnectSteps, "disconnect", "destroy") {
		if !names[want] {
			t.Errorf("no step %q in %v", want, names)
		}
	}
	var sum float64
	for _, n := range CMTimeConnectSteps {
		s := findStep(steps, n)
		if s.TotalMS <= 0 {
			t.Errorf("step %q: total %v ms, want > 0", n, s.TotalMS)
		}
		// cmtime prints us/conn as the total over N.
		const conns = 1000
		if got := s.TotalMS * 1000 / conns; math.Abs(got-s.PerConnUS) > 0.02 {
			t.Errorf("step %q: %v µs/conn, total/N = %v", n, s.PerConnUS, got)
		}
		sum += s.TotalMS
	}
	if got := CMTimeConnectSec(steps); math.Abs(got-sum/1000) > 1e-9 || got <= 0 {
		t.Errorf("connect seconds %v, want %v", got, sum/1000)
	}

	// What cmtime prints when a connection fails (it exits at once), and
	// a table without a connect step: one error each, naming what is
	// missing.
	if _, err := ParseCMTime("creating id\nresolving address\nRDMA_CM_EVENT_ADDR_ERROR, error: -110\n"); err == nil ||
		!strings.Contains(err.Error(), "no step table") || !strings.Contains(err.Error(), "ADDR_ERROR") {
		t.Errorf("failed run: %v", err)
	}
	cut := strings.Replace(string(b), "create qp", "created qp", 1)
	if _, err := ParseCMTime(cut); err == nil || !strings.Contains(err.Error(), `"create qp"`) {
		t.Errorf("table without create qp: %v", err)
	}
}

// Each mode's ratio is rdmaprobe over the same pass's cmtime; a pass
// where either side failed counts as 0 by pass but not in the median.
func TestCMRunSummarise(t *testing.T) {
	c := &CMRun{N: 10, Passes: 3, Modes: []string{CMInterleaved, CMLockstep}}
	add := func(pass int, client, mode string, perSec float64, e string) {
		c.Measurements = append(c.Measurements, CMMeasurement{Pass: pass, Client: client, Mode: mode, PerSec: perSec, Error: e})
	}
	add(1, CMTimeClient, "", 100, "")
	add(1, RDMAProbeClient, CMInterleaved, 80, "")
	add(1, RDMAProbeClient, CMLockstep, 150, "")
	add(2, CMTimeClient, "", 200, "")
	add(2, RDMAProbeClient, CMInterleaved, 100, "")
	add(2, RDMAProbeClient, CMLockstep, 300, "")
	add(3, CMTimeClient, "", 0, "exit status 1")
	add(3, RDMAProbeClient, CMInterleaved, 90, "")
	add(3, RDMAProbeClient, CMLockstep, 90, "")
	r := &Run{RDMACM: c}
	r.Summarise()
	if len(c.Ratios) != 2 {
		t.Fatalf("ratios %+v", c.Ratios)
	}
	in, ls := c.Ratios[0], c.Ratios[1]
	if in.Mode != CMInterleaved || len(in.ByPass) != 3 || in.ByPass[2] != 0 || in.Median != 0.65 || in.Met {
		t.Errorf("interleaved %+v, want by pass 0.8, 0.5, 0 and median 0.65, not met", in)
	}
	if ls.Median != 1.5 || !ls.Met {
		t.Errorf("lockstep %+v, want median 1.5, met", ls)
	}
	if len(r.Targets) != 2 || r.Targets[1].Value != 1.5 || !r.Targets[1].Met || r.Targets[0].Met {
		t.Errorf("targets %+v", r.Targets)
	}
}
