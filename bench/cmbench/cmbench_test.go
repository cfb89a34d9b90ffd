package cmbench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cmtime")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// cmtime's client is read from its step table: the connect steps' total
// is its time, and a client that fails or hangs is said so, with its
// last lines.
func TestCMTimeClient(t *testing.T) {
	table, err := filepath.Abs("../testdata/cmtime-v44-1000.txt")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := cmtimeClient(ctx, []string{script(t, "cat "+table)}, 1000, 10*time.Second)
	steps, err := bench.ParseCMTime(m.Output)
	if err != nil || m.Error != "" {
		t.Fatalf("%v %q", err, m.Error)
	}
	sec := bench.CMTimeConnectSec(steps)
	if m.Connected != 1000 || m.Sec != sec || m.PerSec != 1000/sec || m.StepsMS["connect"] != 14447.19 || m.Client != bench.CMTimeClient {
		t.Errorf("measurement %+v, want 1000 connected in %v s", m, sec)
	}
	m = cmtimeClient(ctx, []string{script(t, "echo 'rdma_connect: Connection refused' >&2; exit 1")}, 10, 10*time.Second)
	if m.Connected != 0 || !strings.Contains(m.Error, "exit") || !strings.Contains(m.Error, "Connection refused") {
		t.Errorf("failed client: %+v", m)
	}
	m = cmtimeClient(ctx, []string{script(t, "exec sleep 30")}, 10, 200*time.Millisecond)
	if m.Connected != 0 || !strings.Contains(m.Error, "after 200ms") {
		t.Errorf("hung client: %+v", m)
	}
}

// rdmaprobe's turn is read from its records: all started together, so
// its time is the longest connect; each step's figure is its median, and
// the first failure is the turn's error.
func TestMeasure(t *testing.T) {
	ok := func(us int64, qp int64) result.ClientRecord {
		return result.ClientRecord{Outcome: result.OutcomeOK, ConnectUS: us, PhasesUS: map[string]int64{result.PhaseQPCreate: qp}}
	}
	recs := []result.ClientRecord{ok(1000, 100), ok(4000, 300), ok(2000, 200),
		{Outcome: result.OutcomeRejected, Error: "reason 28 (consumer defined), private data 4 bytes"}}
	m := measure(bench.CMMeasurement{Client: bench.RDMAProbeClient, Attempted: 4}, recs)
	if m.Connected != 3 || m.Sec != 0.004 || m.PerSec != 750 || m.StepsMS[result.PhaseQPCreate] != 0.2 ||
		m.Outcomes[result.OutcomeOK] != 3 || m.Outcomes[result.OutcomeRejected] != 1 || !strings.HasPrefix(m.Error, "REJECTED: reason 28") {
		t.Errorf("measurement %+v", m)
	}
}

// A turn whose event channel cannot be opened is a failed measurement,
// not the end of the run.
func TestGeneratorWithoutCM(t *testing.T) {
	orig := openCM
	t.Cleanup(func() { openCM = orig })
	openCM = func() (fabric.CM, error) { return nil, errors.New("rdma_create_event_channel: ENODEV") }
	m := generator(context.Background(), Config{Addr: "192.0.2.1", Port: 7471, N: 5, Timeout: time.Second}, bench.CMLockstep)
	if m.Error == "" || m.Connected != 0 || m.Mode != bench.CMLockstep || m.Attempted != 5 {
		t.Errorf("measurement %+v", m)
	}
}
