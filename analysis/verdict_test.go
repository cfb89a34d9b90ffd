package analysis

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

func TestVerdictFromStepsOnly(t *testing.T) {
	// A run saved without points still gets a sentence from its steps.
	s := result.Search{
		Steps: []result.Step{
			{Clients: 300, Trials: 1, Passed: true, Rate: 1, Note: "lower bound"},
			{Clients: 600, Trials: 1, Passed: false, Rate: 0.75, Note: "upper bound"},
		},
		Capacity: 300, FirstFail: 600,
	}
	want := "Breaking point: 300 clients connect at 100%; 600 is the first failure (75%), nothing tested in between."
	if got := Verdict(s, nil, 300, 600, 1); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := Verdict(result.Search{}, nil, 0, 0, 1); got != "No client count was measured." {
		t.Errorf("empty: %q", got)
	}
}

// Under --criterion traffic a count whose clients all connected fails by
// its SLOs: the verdict says so instead of blaming the connect threshold.
func TestVerdictNamesTheSLOs(t *testing.T) {
	missed := func(n int) result.Point {
		p := pt(n, n)
		p.Traffic = &result.Traffic{Judged: true, SLOPassed: false}
		return p
	}
	got := Verdict(result.Search{FirstFail: 50}, []result.Point{missed(50)}, 50, 100, 1)
	want := "Capacity < 50: 50 clients connect at 100% (95% CI 92.8–100%), but its traffic phase missed the SLOs; try a lower --lo."
	if got != want {
		t.Errorf("at --lo:\n got %q\nwant %q", got, want)
	}
	got = Verdict(result.Search{Capacity: 23, FirstFail: 24}, []result.Point{pt(23, 23), missed(24)}, 20, 200, 1)
	if !strings.Contains(got, "24 is the first failure (100% connected; its traffic phase missed the SLOs)") {
		t.Errorf("breaking point: %q does not name the SLOs", got)
	}
	got = Verdict(result.Search{FirstFail: 50}, []result.Point{pt(50, 40)}, 50, 100, 1)
	if !strings.Contains(got, "below the 100% threshold") {
		t.Errorf("connect failure: %q does not name the threshold", got)
	}
}
