package guestagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
)

// Counts cross the serial line at most every 250 ms but the last and a
// new phase's always; samples and traffic progress at most once a second
// each, apart.
func TestThrottle(t *testing.T) {
	var sent []runner.Progress
	clock := time.Unix(1000, 0)
	th := &throttle{send: func(v any) { sent = append(sent, v.(runner.Progress)) }, now: func() time.Time { return clock }}
	at := func(ms int, p runner.Progress) {
		clock = time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond)
		th.progress(p)
	}
	sample := &result.Sample{}
	traffic := &runner.TrafficProgress{Messages: 5}
	connect := func(done int) runner.Progress {
		return runner.Progress{Phase: runner.PhaseConnect, Clients: 10, Done: done}
	}
	at(0, runner.Progress{Phase: runner.PhaseStart, Clients: 10}) // sent: the first
	at(50, connect(1))                                            // sent: a new phase
	at(100, connect(2))                                           // held: 50 ms after
	at(200, runner.Progress{Sample: sample})                      // sent: the first sample
	at(300, runner.Progress{Traffic: traffic})                    // sent: traffic has its own second
	at(400, connect(3))                                           // sent: 350 ms after the last count
	at(500, connect(10))
	at(550, runner.Progress{Phase: runner.PhaseCalibration, Clients: 10, Done: 10}) // sent: a new phase
	at(900, runner.Progress{Sample: sample})                                        // held: 700 ms after the last sample
	at(1200, runner.Progress{Sample: sample})                                       // sent
	at(1250, runner.Progress{Traffic: traffic})                                     // held
	at(1300, runner.Progress{Traffic: traffic})                                     // sent: a second after
	var got []string
	for _, p := range sent {
		switch {
		case p.Sample != nil:
			got = append(got, "sample")
		case p.Traffic != nil:
			got = append(got, "traffic")
		default:
			got = append(got, fmt.Sprintf("%s %d", p.Phase, p.Done))
		}
	}
	want := []string{"start 0", "connect 1", "sample", "traffic", "connect 3", "connect 10", "calibration 10", "sample", "traffic"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
}

// takeProfiles hands back every profile once: a second call finds none,
// and a guest that wrote none has an empty set, not an error.
func TestTakeProfiles(t *testing.T) {
	dir := t.TempDir()
	if got, err := takeProfiles(filepath.Join(dir, "absent")); err != nil || len(got) != 0 {
		t.Fatalf("no profile dir: %v, %v", got, err)
	}
	for name, body := range map[string]string{"server.cpu.pprof": "cpu", "gen-0.heap.pprof": "heap"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := takeProfiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := vm.GuestProfiles{"server.cpu.pprof": []byte("cpu"), "gen-0.heap.pprof": []byte("heap")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("took %v, want %v", got, want)
	}
	if again, err := takeProfiles(dir); err != nil || len(again) != 0 {
		t.Errorf("second take: %v, %v; want none left", again, err)
	}
}

// The ops that need no point answer from the agent's state; a request
// the agent cannot read or does not know is an error, not a panic.
func TestHandle(t *testing.T) {
	a := &agent{}
	ctx := context.Background()
	none := func(any) { t.Error("progress from an op without any") }
	got, err := a.handle(ctx, vm.OpDevice, nil, none)
	if err != nil || got.(vm.GuestDevice).Device != nil {
		t.Errorf("device before a point: %v, %v; want none", got, err)
	}
	a.last = &result.DeviceInfo{Name: "rxe0"}
	if got, _ := a.handle(ctx, vm.OpDevice, nil, none); got.(vm.GuestDevice).Device.Name != "rxe0" {
		t.Errorf("device after a point: %v", got)
	}
	if got, err := a.handle(ctx, vm.OpHosts, nil, none); err != nil || len(got.([]result.Host)) != 0 {
		t.Errorf("hosts without a peer: %v, %v", got, err)
	}
	if _, err := a.handle(ctx, vm.OpPoint, json.RawMessage(`{"spec": 3}`), none); err == nil {
		t.Error("a point request that is not JSON of one was taken")
	}
	if _, err := a.handle(ctx, "reboot", nil, none); err == nil || !strings.Contains(err.Error(), `unknown op "reboot"`) {
		t.Errorf("unknown op: %v", err)
	}
}
