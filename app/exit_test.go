package app

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every exit status --help documents is what a command of that kind
// returns, each produced here for real.
func TestExitStatuses(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cheap := []string{"--backend", "sim", "--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--sample-interval", "0", "--results", root}
	cases := map[int][][]string{
		ExitMeasured: {
			append([]string{"ramp", "--clients", "3"}, cheap...),
			// A capacity below the count asked is a finding, not an error.
			append([]string{"ramp", "--clients", "3", "--sim-max-qp", "2"}, cheap...),
		},
		ExitRunError: {
			{"report", filepath.Join(root, "missing.json")},
			append(append([]string{"ramp", "--clients", "3"}, cheap...), "--results", filepath.Join(file, "results")),
		},
		ExitUsage: {{"ramp", "--bogus"}, {"search", "--lo", "x"}, {"frobnicate"}, {"report", "a.json", "b.json"}},
	}
	for code, runs := range cases {
		for _, args := range runs {
			_, errOut, got := run(t, args...)
			if got != code {
				t.Errorf("%q: exit %d, want %d (%s)\n%s", args, got, code, meaning(code), errOut)
			}
		}
	}

	// Interrupted mid-point: cancelling MainContext's context is what
	// SIGINT does to the probe's.
	cmd := runAsync(t, append([]string{"ramp", "--clients", "500", "--connect-rate", "50"}, cheap...)...)
	serving(t, childPID(t, "serve"), 5)
	cmd.interrupt()
	if r := <-cmd.done; r.code != ExitInterrupted || !strings.Contains(r.errOut, "interrupted") {
		t.Errorf("interrupted ramp: exit %d, stderr %q; want %d", r.code, r.errOut, ExitInterrupted)
	}
	noChildren(t)
	cases[ExitInterrupted] = nil

	// 3: a requirement the run cannot meet.
	args := append([]string{"ramp", "--clients", "3", "--sim-max-qp", "2", "--require", "3"}, cheap...)
	if _, errOut, got := run(t, args...); got != ExitRequirement {
		t.Errorf("%q: exit %d, want %d\n%s", args, got, ExitRequirement, errOut)
	}
	cases[ExitRequirement] = nil

	help, _, _ := run(t, "--help")
	help = strings.Join(strings.Fields(help), " ") // --help wraps its lines
	for _, s := range exitStatuses {
		if _, ok := cases[s.code]; !ok {
			t.Errorf("exit status %d (%s) is documented but not tested here", s.code, s.meaning)
		}
		if !strings.Contains(help, strconv.Itoa(s.code)+" "+strings.Join(strings.Fields(s.meaning), " ")) {
			t.Errorf("--help does not list exit status %d", s.code)
		}
	}
}

func meaning(code int) string {
	for _, s := range exitStatuses {
		if s.code == code {
			return s.meaning
		}
	}
	return "undocumented"
}

// The README's exit status table is exitStatuses (-update rewrites it).
func TestREADMEExitStatuses(t *testing.T) {
	const path, begin, end = "../README.md", "<!-- exit:begin -->\n", "<!-- exit:end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("README lacks the %q ... %q markers", strings.TrimSpace(begin), end)
	}
	want := ExitTable()
	if readme[i+len(begin):j] == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(readme[:i+len(begin)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README's exit statuses differ from the code's; run go test ./app -run TestREADMEExitStatuses -update\nwant:\n%s", want)
}
