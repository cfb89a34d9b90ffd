package runner

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// trafficClients is goodClients that, told "traffic", reports a phase of
// 100 messages per generator (or, with mode die, exits instead; with
// hang, touches the file mark and reports only when released: its stdin
// ends, as the runner ends it on an interrupt).
func trafficClients(mode string, mark ...string) string {
	report := `echo "{\"event\":\"traffic\",\"traffic\":{\"op\":\"send\",\"msg_bytes\":64,\"depth\":1,\"duration_sec\":0.5,\"clients\":$n,\"messages\":100,\"bytes\":6400,\"errors\":{\"RETRY_EXC_ERR\":1},\"generator_cpu_cores\":0.25,\"generator_cores\":1}}"`
	after := report
	switch mode {
	case "die":
		after = "exit 3"
	case "hang":
		after = `touch '` + mark[0] + `'
while read -r x; do :; done
` + strings.ReplaceAll(report, "0.5", "0.1") + `
exit 0`
	}
	return strings.Replace(goodClients, "cat >/dev/null", `read -r line || exit 0
while [ -z "$line" ]; do read -r line || exit 0; done # heartbeats
[ "$line" = "traffic" ] || { echo "{\"event\":\"error\",\"error\":\"got '$line'\"}"; exit 1; }
`+after+`
cat >/dev/null`, 1)
}

func withTraffic(s *Spec) { s.Traffic = client.TrafficConfig{Duration: 500 * time.Millisecond} }

func TestTrafficPhaseMerges(t *testing.T) {
	r := newRunner(t, fake(t, goodServer, trafficClients("")), 2, withTraffic)
	pt, err := r.RunPoint(context.Background(), 6, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr := pt.Traffic
	if tr == nil {
		t.Fatal("no traffic phase recorded")
	}
	if tr.Error != "" || tr.Clients != 6 || tr.Messages != 200 || tr.Errors["RETRY_EXC_ERR"] != 2 || tr.MsgRate != 400 {
		t.Errorf("merged phase %+v", tr)
	}
	if tr.GeneratorCPU != 0.25 || tr.GeneratorCores != 1 {
		t.Errorf("generator CPU %v of %d", tr.GeneratorCPU, tr.GeneratorCores)
	}
	// The server was asked its usage at the phase's start and end, and
	// said 1 s of CPU and 0.75 s of polling more the second time: both
	// are over the same wall time, which was at least the fake
	// generators' (instant) phase and at most the test's.
	if tr.ServerCPU <= 0 || math.Abs(tr.ServerSpin/tr.ServerCPU-0.75) > 1e-9 {
		t.Errorf("server CPU %v cores, %v of them polling", tr.ServerCPU, tr.ServerSpin)
	}
}

// A server that does not answer a usage request (wedged) costs the
// phase the wait for the answer, and its CPU is read from its process
// instead: no polling figure.
func TestTrafficPhaseServerSilentOnUsage(t *testing.T) {
	defer func(d time.Duration) { usageTimeout = d }(usageTimeout)
	usageTimeout = 300 * time.Millisecond
	silent := strings.Replace(goodServer, `[ "$line" = usage ]`, `false`, 1)
	r := newRunner(t, fake(t, silent, trafficClients("")), 1, withTraffic)
	pt, err := r.RunPoint(context.Background(), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if tr := pt.Traffic; tr == nil || tr.Error != "" || tr.Messages != 100 || tr.ServerSpin != 0 {
		t.Fatalf("phase %+v", pt.Traffic)
	}
}

func TestTrafficPhaseGeneratorDies(t *testing.T) {
	r := newRunner(t, fake(t, goodServer, trafficClients("die")), 1, withTraffic)
	pt, err := r.RunPoint(context.Background(), 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Traffic == nil || !strings.Contains(pt.Traffic.Error, "during the traffic phase") {
		t.Fatalf("phase %+v", pt.Traffic)
	}
	if pt.Connected != 3 {
		t.Errorf("the connect phase's outcome changed: %d connected", pt.Connected)
	}
}

// Interrupted during the phase, the point keeps what the generators
// report when signalled, and says it was interrupted.
func TestTrafficPhaseInterrupted(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "in-phase")
	r := newRunner(t, fake(t, goodServer, trafficClients("hang", mark)), 1, func(s *Spec) {
		s.Traffic = client.TrafficConfig{Duration: time.Hour}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var pt result.Point
	done := make(chan error)
	go func() {
		var err error
		pt, err = r.RunPoint(ctx, 2, 1)
		done <- err
	}()
	// Interrupted once the generator is in its (hour-long) phase.
	eventually.True(t, 20*time.Second, "the generator is in its traffic phase", func() bool {
		_, err := os.Stat(mark)
		return err == nil
	})
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("an interrupted point returned no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the interrupted point did not end")
	}
	if pt.Traffic == nil || pt.Traffic.Error != "interrupted" || pt.Traffic.Messages != 100 || pt.Traffic.DurationSec != 0.1 {
		t.Fatalf("phase %+v", pt.Traffic)
	}
}

// The references a run takes follow its designs: RC for the RC designs,
// UD too once ud is among them, each transport once.
func TestSpecTransports(t *testing.T) {
	for _, c := range []struct {
		mode    string
		designs []string
		want    string
	}{
		{"srq", nil, "RC"},
		{"ud", nil, "UD"},
		{"per-client", []string{"per-client", "srq", "ud", "mux"}, "RC,UD"},
		{"ud", []string{"ud", "srq"}, "UD,RC"},
	} {
		var got []string
		for _, tr := range (Spec{Mode: c.mode, Designs: c.designs}).Transports() {
			if tr == "" {
				tr = "RC"
			}
			got = append(got, tr)
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("mode %s designs %v: %v, want %s", c.mode, c.designs, got, c.want)
		}
	}
}
