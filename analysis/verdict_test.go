package analysis

import (
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
