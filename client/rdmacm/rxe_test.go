package rdmacm

import (
	"bufio"
	"context"
	"flag"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/verbs"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// The tests on rxe run in the Soft-RoCE guest (internal/guestsuites),
// against testdata/cmcapserver on the netdev device's address, since
// rdma_cm resolves no route on lo.
var (
	capServer = flag.String("cmcapserver", "", "the cmcapserver fixture (testdata/cmcapserver), for the tests on a device")
	cmAddr    = flag.String("cm-addr", "192.0.2.1", "an address of an rdma_cm-capable device")
)

// startCapServer starts the fixture with args on a port of its own and
// returns its address once it listens.
func startCapServer(t *testing.T, port int, args ...string) string {
	t.Helper()
	if *capServer == "" {
		t.Skip("no -cmcapserver: these tests run on a device, in the Soft-RoCE guest (internal/guestsuites)")
	}
	cmd := exec.Command(*capServer, append([]string{"-a", *cmAddr, "-p", strconv.Itoa(port)}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "listening on") {
		t.Fatalf("cmcapserver: %q %v", line, err)
	}
	return net.JoinHostPort(*cmAddr, strconv.Itoa(port))
}

func openCM(t *testing.T) fabric.CM {
	t.Helper()
	cm, err := verbs.OpenCM()
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// On rxe: connections up to the server's cap are made in both steppings,
// the rest REJECTED with the server's reason (its private data arrives
// as the REJ's whole field, 148 bytes, not the 4 it sent), and a
// port nobody listens on is REJECTED as no listener.
func TestRxeConnectReject(t *testing.T) {
	addr := startCapServer(t, 7471, "-c", "3")
	for _, lockstep := range []bool{false, true} {
		cm := openCM(t)
		recs, conns, err := Run(context.Background(), cm, Config{Addr: addr, N: 5, Timeout: 20 * time.Second, Lockstep: lockstep,
			PrivateData: []byte("rdmaprobe"), Engine: client.Config{MsgSize: 64}})
		if err != nil {
			t.Fatal(err)
		}
		got := outcomes(recs)
		for _, r := range recs {
			if r.Outcome == result.OutcomeRejected && !strings.Contains(r.Error, "reason 28 (consumer defined), private data") {
				t.Errorf("lockstep %v: rejected %q", lockstep, r.Error)
			}
			if r.Outcome == result.OutcomeOK && (r.LocalQPN == 0 || r.RemoteQPN == 0 || len(r.PhasesUS) != 4) {
				t.Errorf("lockstep %v: connected %+v", lockstep, r)
			}
		}
		conns.Close()
		cm.Close()
		if got[result.OutcomeOK] != 3 || got[result.OutcomeRejected] != 2 {
			t.Errorf("lockstep %v: outcomes %v, want 3 ok, 2 REJECTED", lockstep, got)
		}
	}
	cm := openCM(t)
	defer cm.Close()
	recs, conns, err := Run(context.Background(), cm, Config{Addr: net.JoinHostPort(*cmAddr, "7499"), N: 1, Timeout: 20 * time.Second,
		Engine: client.Config{MsgSize: 64}})
	if err != nil {
		t.Fatal(err)
	}
	conns.Close()
	if r := recs[0]; r.Outcome != result.OutcomeRejected || !strings.Contains(r.Error, "no listener") {
		t.Errorf("no listener: %s %q", r.Outcome, r.Error)
	}
}

// An address no device of this host reaches ends at address resolution.
func TestRxeAddrError(t *testing.T) {
	startCapServer(t, 7472, "-c", "1") // skips off the guest
	cm := openCM(t)
	defer cm.Close()
	recs, conns, err := Run(context.Background(), cm, Config{Addr: "198.51.100.7:7472", N: 1, Timeout: 3 * time.Second,
		Engine: client.Config{MsgSize: 64}})
	if err != nil {
		t.Fatal(err)
	}
	conns.Close()
	if r := recs[0]; r.Outcome != result.OutcomeAddrError {
		t.Errorf("unreachable address: %s %q", r.Outcome, r.Error)
	}
}

// A server that drops the connections it holds: each drop is seen while
// held (Watch), as DISCONNECTED.
func TestRxeDisconnected(t *testing.T) {
	addr := startCapServer(t, 7473, "-c", "2", "-D", "300")
	cm := openCM(t)
	defer cm.Close()
	recs, conns, err := Run(context.Background(), cm, Config{Addr: addr, N: 2, Timeout: 20 * time.Second, Engine: client.Config{MsgSize: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	if got := outcomes(recs); got[result.OutcomeOK] != 2 {
		t.Fatalf("outcomes %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var dropped []result.ClientRecord
	conns.Watch(ctx, func(r result.ClientRecord) {
		dropped = append(dropped, r)
		if len(dropped) == 2 {
			cancel()
		}
	})
	if len(dropped) != 2 {
		t.Fatalf("%d drops seen, want 2", len(dropped))
	}
	for _, r := range dropped {
		if r.Outcome != result.OutcomeDisconnected || !strings.Contains(r.Error, "RDMA_CM_EVENT_DISCONNECTED while held") {
			t.Errorf("drop %+v", r)
		}
	}
}

// The traffic phase over rdma_cm connections on rxe is the client
// engine's: closed loop with depth, open loop with its schedule, and
// busy-polled with the generator's spin measured.
func TestRxeTraffic(t *testing.T) {
	const size = 256
	addr := startCapServer(t, 7474, "-c", "16", "-e", strconv.Itoa(size), "-d", "2")
	for _, tc := range []struct {
		name   string
		engine client.Config
		cfg    client.TrafficConfig
	}{
		{"closed", client.Config{MsgSize: size, Depth: 2}, client.TrafficConfig{Duration: time.Second, Depth: 2}},
		{"open", client.Config{MsgSize: size, Depth: 2}, client.TrafficConfig{Duration: time.Second, Depth: 2, Rate: 20}},
		{"busy-poll", client.Config{MsgSize: size, BusyPoll: 50 * time.Microsecond}, client.TrafficConfig{Duration: time.Second, BusyPoll: 50 * time.Microsecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := openCM(t)
			defer cm.Close()
			recs, conns, err := Run(context.Background(), cm, Config{Addr: addr, N: 3, Timeout: 20 * time.Second, Engine: tc.engine})
			if err != nil {
				t.Fatal(err)
			}
			defer conns.Close()
			if got := outcomes(recs); got[result.OutcomeOK] != 3 {
				t.Fatalf("outcomes %v", got)
			}
			tr := conns.Traffic(context.Background(), tc.cfg)
			if tr.Error != "" || tr.Clients != 3 || tr.ClientsFailed != 0 || len(tr.Errors) != 0 || tr.Unmeasured != 0 ||
				tr.Messages < 3 || tr.Bytes != tr.Messages*size || tr.Latency.N < tr.Messages {
				t.Fatalf("traffic %+v", tr)
			}
			if open := tc.cfg.Rate > 0; open != (tr.Schedule != nil) {
				t.Errorf("schedule %+v at %v/s", tr.Schedule, tr.RatePerClient)
			}
			if tc.engine.BusyPoll > 0 && tr.GeneratorSpin <= 0 {
				t.Errorf("busy-polled, yet no generator spin: %+v", tr)
			}
			t.Logf("%s: %d messages, %.0f msg/s, p50 %.0f us", tc.name, tr.Messages, tr.MsgRate, tr.Latency.P50)
		})
	}
}
