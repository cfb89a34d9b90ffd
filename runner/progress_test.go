package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Failures by class and phase counts reach the parent while the point
// runs: the sum of what each generator's "progress" says, before any
// generator is done.
func TestProgressStreamsFailures(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	// Each generator reports one timeout, then holds its "done" until
	// the test has seen both generators' failures.
	clients := strings.Replace(goodClients, "recs=\"\"\n",
		"echo '{\"event\":\"progress\",\"done\":1,\"ok\":0,\"failed\":{\"timeout\":1},\"phases\":{\"tcp\":[0,1]}}'\n"+
			"until [ -e "+gate+" ]; do sleep 0.05; done\nrecs=\"\"\n", 1)
	r := newRunner(t, fake(t, goodServer, clients), 2)
	var during []Progress
	r.opts.Progress = func(p Progress) {
		if p.Done < p.Clients {
			during = append(during, p)
		}
		if p.Failed["timeout"] == 2 && len(p.Phases["tcp"]) == 2 && p.Phases["tcp"][1] == 2 && p.Done < p.Clients {
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	pt, err := r.RunPoint(context.Background(), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gate); err != nil {
		t.Fatalf("never saw both generators' timeouts during the point: %+v (point error %q)", during, pt.Error)
	}
}
