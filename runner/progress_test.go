package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// The collectors' readings reach the parent while the point runs, the
// server's process among them: live metrics show CPU and memory before
// the point ends.
func TestProgressStreamsSamples(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	clients := strings.Replace(goodClients, "recs=\"\"\n",
		"until [ -e "+gate+" ]; do sleep 0.05; done\nrecs=\"\"\n", 1)
	r := newRunner(t, fake(t, goodServer, clients), 1)
	var mu sync.Mutex
	seen := 0
	r.opts.Progress = func(p Progress) {
		if p.Sample == nil {
			return
		}
		for _, ps := range p.Sample.Procs {
			if ps.Role == "server" && ps.RSS > 0 {
				mu.Lock()
				seen++
				mu.Unlock()
				os.WriteFile(gate, nil, 0o644)
			}
		}
	}
	pt, err := r.RunPoint(context.Background(), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen == 0 {
		t.Fatalf("no reading with the server's process reached Progress during the point (point error %q)", pt.Error)
	}
}
