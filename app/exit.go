package app

import (
	"fmt"
	"strings"
)

// Exit statuses a script can rely on; --help and the README list them
// from exitStatuses.
const (
	// ExitMeasured: the command did what it was asked. A probe exits 0
	// whatever capacity it measured: pass and fail are findings, in its
	// output and run.json, not errors.
	ExitMeasured = 0
	// ExitRunError: the run could not start or could not finish.
	ExitRunError = 1
	// ExitUsage: the command line does not parse or does not make sense.
	ExitUsage = 2
	// ExitRequirement: the run finished, but the capacity --require asked
	// for was not met (a gate for CI).
	ExitRequirement = 3
	// ExitInterrupted: SIGINT (Ctrl-C) or SIGTERM, as a shell reports a
	// process killed by SIGINT (128 + 2).
	ExitInterrupted = 130
)

// exitStatuses are what each status means, for --help and the README.
var exitStatuses = []struct {
	code    int
	meaning string
}{
	{ExitMeasured, "measured: the command did what it was asked; a probe exits 0 whatever capacity it found (the verdict is in its output and run.json)"},
	{ExitRunError, "run error: the run could not start or finish (no usable backend, a guest that did not boot or died, a point error with --stop-on-error, a file that cannot be read or written); the points completed are saved"},
	{ExitUsage, "usage: an unknown command or flag, a value that does not parse, flags that do not go together"},
	{ExitRequirement, "requirement not met: the run finished, but the capacity --require N asked for (by --criterion) was not reached; the run is saved"},
	{ExitInterrupted, "interrupted: search, ramp or bench stopped by Ctrl-C (SIGINT) or SIGTERM; the points completed, and the one cut short, are saved (serve, which ends that way, exits 0)"},
}

// exitHelp is the exit statuses as the App's help lists them.
func exitHelp() string {
	var b strings.Builder
	b.WriteString("Exit status:")
	for _, s := range exitStatuses {
		fmt.Fprintf(&b, "\n  %3d  %s", s.code, s.meaning)
	}
	return b.String()
}

// ExitTable is the exit statuses as the README's Markdown table.
func ExitTable() string {
	var b strings.Builder
	b.WriteString("| status | meaning |\n|---|---|\n")
	for _, s := range exitStatuses {
		fmt.Fprintf(&b, "| %d | %s |\n", s.code, s.meaning)
	}
	return b.String()
}
