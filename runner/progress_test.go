package runner

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
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

// A point says each phase as it enters it, in the order it runs them:
// the calibration, the start, the connect phase from the release, the
// calibration again and the traffic phase.
func TestProgressPhases(t *testing.T) {
	spec := Spec{Procs: 2, Threshold: 1, Timeout: 5 * time.Second, StartTimeout: 5 * time.Second,
		TLSKex: certs.KexX25519, CalibrationWindow: 20 * time.Millisecond}
	withTraffic(&spec)
	var mu sync.Mutex
	var phases []string
	r, err := NewLocal(spec, LocalOptions{Exe: fake(t, goodServer, trafficClients("")), Certs: pairs(t),
		Progress: func(p Progress) {
			mu.Lock()
			defer mu.Unlock()
			if p.Sample == nil && (len(phases) == 0 || phases[len(phases)-1] != p.Phase) {
				phases = append(phases, p.Phase)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunPoint(context.Background(), 4, 0); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{PhaseCalibration, PhaseStart, PhaseConnect, PhaseCalibration, PhaseTraffic}
	if !reflect.DeepEqual(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
}

// hosts names generator i's host as host-(i/2): two generators a host.
type hosts struct{ RemoteLauncher }

func (hosts) Host(i int) string { return "host-" + strconv.Itoa(i/2) }

// With generators on other hosts, the counts go per host too: each
// host's share of the clients and its generators' counts summed.
func TestProgressPerHost(t *testing.T) {
	c := newCollection(Spec{}, 10, make([]*process, 3), nil)
	c.remote = hosts{}
	c.st[0].progress = protocol.Event{Done: 3, OK: 2}
	c.st[1].progress = protocol.Event{Done: 1, OK: 1}
	c.st[2].progress = protocol.Event{Done: 2, OK: 2}
	got := c.hostProgress()
	want := []HostProgress{{Host: "host-0", Clients: 7, Done: 4, OK: 3}, {Host: "host-1", Clients: 3, Done: 2, OK: 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("per host %+v, want %+v", got, want)
	}
	c.remote = nil
	if got := c.hostProgress(); got != nil {
		t.Errorf("generators on this machine: per host %+v, want none", got)
	}
}
