package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// --client-kind rdmacm's mistakes are refused in one line before
// anything starts: private data past what a connect request carries
// (as hex and as @file), bad hex, no server, kinds that contradict
// --client-cmd, and what rdma_cm clients cannot do (RDMA WRITE, a
// server design of the built-in protocol).
func TestClientKindRefusals(t *testing.T) {
	big := filepath.Join(t.TempDir(), "pd")
	if err := os.WriteFile(big, make([]byte, 57), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := []string{"--server-cmd", "true {port}"}
	cases := []struct {
		args []string
		want string
	}{
		{append([]string{"--client-kind", "rdmacm", "--cm-private-data", strings.Repeat("ab", 57)}, srv...), "57 bytes, an RC connect request carries at most 56"},
		{append([]string{"--client-kind", "rdmacm", "--cm-private-data", "@" + big}, srv...), "57 bytes"},
		{append([]string{"--client-kind", "rdmacm", "--cm-private-data", "xyz"}, srv...), "want hex digits or @file"},
		{[]string{"--client-kind", "rdmacm"}, "needs an rdma_cm server: --server-cmd"},
		{append([]string{"--client-kind", "rdmacm", "--client-cmd", "true"}, srv...), "one or the other"},
		{append([]string{"--client-kind", "command"}, srv...), "needs --client-cmd"},
		{append([]string{"--client-kind", "tcp"}, srv...), "want builtin, rdmacm or command"},
		{append([]string{"--cm-private-data", "00"}, srv...), "goes with --client-kind rdmacm"},
		{append([]string{"--client-kind", "rdmacm", "--criterion", "traffic"}, srv...), "run no traffic phase unless the server echoes (--cm-server-echoes)"},
		{append([]string{"--cm-server-echoes"}, srv...), "--cm-server-echoes goes with --client-kind rdmacm"},
		{append([]string{"--client-kind", "rdmacm", "--cm-server-echoes", "--op", "write"}, srv...), "--op write: rdma_cm clients send and the server echoes"},
		{append([]string{"--client-kind", "rdmacm", "--mode", "ud"}, srv...), "--mode ud is the built-in server's and clients' protocol: not with rdma_cm clients"},
		{append([]string{"--client-kind", "rdmacm", "--cm-steps", "fast"}, srv...), `--cm-steps "fast": want auto, lockstep or interleaved`},
		{append([]string{"--client-kind", "rdmacm", "--cm-steps", "lockstep", "--connect-rate", "10"}, srv...), "not with --connect-rate"},
		{append([]string{"--cm-steps", "lockstep"}, srv...), "--cm-steps goes with --client-kind rdmacm"},
	}
	for _, c := range cases {
		args := append([]string{"ramp", "--backend", "sim", "--clients", "1", "--results", t.TempDir()}, c.args...)
		_, errOut, code := run(t, args...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, errOut, ExitUsage, c.want)
		}
	}
}

// rdma-core's own rdma_cm servers, held at 50 connections by one
// generator process of rdma_cm clients in the guest: cmtime's server
// (which posts no receives, so no traffic phase runs) and rping's
// persistent server, one attempt in flight at a time because Debian
// 12's rping -P accepts a request twice when requests overlap (see
// TestVMTargetRping). Every step of every connection is timed.
//
// Guest, shared netdev: rdma_cm resolves only on rxe on the netdev, and rdma-core's servers run there.
func TestVMRDMACMServers(t *testing.T) {
	needVM(t)
	needTool(t, "cmtime", "rdmacm-utils")
	needTool(t, "rping", "rdmacm-utils")
	const n = 50
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"cmtime", []string{"--server-cmd", "cmtime -b {addr} -p {port} -c {n}"}},
		{"rping", []string{"--server-cmd", "rping -s -P -a {addr} -p {port}", "--inflight", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			args := append([]string{"ramp", "--backend", "vm", "--clients", itoa(n), "--client-kind", "rdmacm",
				"--calibrate", "0", "--vm-mem", "2048", "--vm-no-reference", "--timeout", "60s", "--results", root}, tc.args...)
			out, errOut, code := run(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errOut, out)
			}
			run := loadOnlyRun(t, root)
			if run.Config.ClientKind != result.ClientRDMACM || run.Config.Traffic != nil {
				t.Errorf("config: client kind %q, traffic %+v", run.Config.ClientKind, run.Config.Traffic)
			}
			p := run.Points[0]
			if p.Connected != n {
				t.Fatalf("%d of %d connected, outcomes %v, error %q", p.Connected, n, p.Outcomes, p.Error)
			}
			// The default window (256) holds all 50: auto steps in lockstep;
			// rping's --inflight 1 does not.
			if want := map[string]string{"cmtime": "lockstep", "rping": "interleaved"}[tc.name]; run.Config.CMSteps != "auto" || p.CMSteps != want {
				t.Errorf("cm_steps: config %q, point %q, want auto and %s", run.Config.CMSteps, p.CMSteps, want)
			}
			for _, ph := range []string{result.PhaseResolveAddr, result.PhaseResolveRoute, result.PhaseQPCreate, result.PhaseEstablish} {
				if p.Phases[ph].N != n {
					t.Errorf("phase %s timed for %d connections, want %d", ph, p.Phases[ph].N, n)
				}
			}
			for _, r := range p.Records {
				if r.LocalQPN == 0 || r.RemoteQPN == 0 || r.ConnectUS <= 0 {
					t.Errorf("record %+v: want both QPNs and the connect time", r)
					break
				}
			}
			if srv := p.Peak.ByRole["server"]; srv["qp"] < n {
				t.Errorf("server's QPs at the peak %d, want at least %d (by role %v)", srv["qp"], n, p.Peak.ByRole)
			}
			t.Logf("%s: %d connected, %.0f connects/s; establish p50 %.1f ms; kernel objects by role %v",
				tc.name, p.Connected, float64(p.Connected)/p.ConnectSec, p.Phases[result.PhaseEstablish].P50, p.Peak.ByRole)
			noChildren(t)
		})
	}
}

// The capped rdma_cm fixture (testdata/cmcapserver), holding 5 and
// rejecting above: search with rdma_cm clients between 4 and 6 (4, 6,
// then 5) finds exactly 5, and the diagnosis names REJECTED, the
// server's own cap and the reason it gave.
//
// Guest, shared netdev: REJECTED with private data comes from rxe's rdma_cm.
func TestVMRDMACMCap(t *testing.T) {
	needVM(t)
	needTool(t, "gcc", "gcc")
	src, err := filepath.Abs("../testdata/cmcapserver")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	out, errOut, code := run(t, "search", "--backend", "vm", "--lo", "4", "--hi", "6", "--calibrate", "0",
		"--vm-mem", "2048", "--vm-no-reference", "--results", root, "--timeout", "30s", "--client-kind", "rdmacm", "--cm-private-data", "72647072",
		"--server-build", "make -s -C "+src+" OUT={build}", "--server-build-cache", t.TempDir(),
		"--server-cmd", "{build}/cmcapserver -a {addr} -p {port} -c 5")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	run := loadOnlyRun(t, root)
	if s := run.Search; s == nil || s.Capacity != 5 || s.FirstFail != 6 {
		t.Fatalf("search %+v, want capacity 5 and first failure 6\n%s", run.Search, out)
	}
	for _, p := range run.Points {
		if p.Clients == 6 {
			if p.Connected != 5 || p.Outcomes[result.OutcomeRejected] != 1 {
				t.Errorf("6 clients: %d connected, outcomes %v", p.Connected, p.Outcomes)
			}
			for _, r := range p.Records {
				if r.Outcome == result.OutcomeRejected && !strings.Contains(r.Error, "reason 28 (consumer defined)") {
					t.Errorf("rejected client: %q, want the reason named", r.Error)
				}
			}
		}
	}
	d := run.Diagnosis
	if d == nil || d.Limit != "server-rejected" || !strings.Contains(d.Summary+" "+strings.Join(d.Evidence, " "), result.OutcomeRejected) {
		t.Errorf("diagnosis %+v does not name %s", d, result.OutcomeRejected)
	}
	t.Logf("diagnosis: %+v", d)
	noChildren(t)
}

// rdma_cm clients against a server that echoes (the cmcapserver fixture
// with -e): with --cm-server-echoes the traffic phase runs over the
// rdma_cm connections in the built-in clients' engine, here its open
// loop (--msg-rate), every client measured, every echo verified and
// none failed.
//
// Guest, shared netdev: the echoes cross rdma_cm connections on rxe.
func TestVMRDMACMEcho(t *testing.T) {
	needVM(t)
	needTool(t, "gcc", "gcc")
	src, err := filepath.Abs("../testdata/cmcapserver")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "4", "--client-kind", "rdmacm", "--cm-server-echoes",
		"--msg-rate", "20", "--traffic", "1s", "--depth", "2", "--msg-size", "256", "--calibrate", "0", "--vm-mem", "2048", "--vm-no-reference", "--timeout", "30s",
		"--results", root, "--server-build", "make -s -C "+src+" OUT={build}", "--server-build-cache", t.TempDir(),
		"--server-cmd", "{build}/cmcapserver -a {addr} -p {port} -c 8 -e 4096 -d 2")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	run := loadOnlyRun(t, root)
	if tc := run.Config.Traffic; tc == nil || tc.Depth != 2 {
		t.Errorf("config traffic %+v", run.Config.Traffic)
	}
	p := run.Points[0]
	tr := p.Traffic
	if p.Connected != 4 || tr == nil {
		t.Fatalf("%d of 4 connected, outcomes %v, traffic %+v", p.Connected, p.Outcomes, tr)
	}
	if tr.Op != result.OpSend || tr.Clients != 4 || tr.ClientsFailed != 0 || len(tr.Errors) != 0 || tr.Unmeasured != 0 ||
		tr.Messages < 4 || tr.Bytes != tr.Messages*256 || tr.Latency.N < tr.Messages || tr.PerClient.Min <= 0 {
		t.Errorf("traffic %+v", tr)
	}
	// The open loop of the built-in clients, schedule and all.
	if s := tr.Schedule; tr.RatePerClient != 20 || s == nil || s.Due < tr.Messages {
		t.Errorf("open loop at %v/s, schedule %+v, %d messages", tr.RatePerClient, s, tr.Messages)
	}
	t.Logf("traffic over rdma_cm: %d messages, %.0f msg/s, p50 %.2f ms", tr.Messages, tr.MsgRate, tr.Latency.P50/1e3)
	noChildren(t)
}

// A server that drops every held connection a moment after it holds
// them all (the fixture's -D), during the traffic phase, after each
// generator reported its clients connected: the point reports each as
// DISCONNECTED and fails, its traffic phase ended by the drop.
//
// Guest, shared netdev: DISCONNECTED is rxe's rdma_cm event.
func TestVMRDMACMDropped(t *testing.T) {
	needVM(t)
	needTool(t, "gcc", "gcc")
	src, err := filepath.Abs("../testdata/cmcapserver")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	out, errOut, _ := run(t, "ramp", "--backend", "vm", "--clients", "2", "--client-kind", "rdmacm", "--cm-server-echoes",
		"--traffic", "4s", "--msg-size", "64", "--calibrate", "0", "--vm-mem", "2048", "--vm-no-reference", "--timeout", "30s",
		"--results", root, "--server-build", "make -s -C "+src+" OUT={build}", "--server-build-cache", t.TempDir(),
		"--server-cmd", "{build}/cmcapserver -a {addr} -p {port} -c 2 -e 64 -D 1500")
	run := loadOnlyRun(t, root)
	p := run.Points[0]
	if p.Passed || p.Connected != 0 || p.Outcomes[result.OutcomeDisconnected] != 2 {
		t.Fatalf("passed %v, %d connected, outcomes %v; want both DISCONNECTED\n%s\n%s", p.Passed, p.Connected, p.Outcomes, errOut, out)
	}
	for _, r := range p.Records {
		if !strings.Contains(r.Error, "while held") || r.RemoteQPN == 0 {
			t.Errorf("record %+v: want the drop while held, on a connection that was made", r)
		}
	}
	// The generator answers the drop (rdma_disconnect), which flushes
	// the QP's posted messages: the phase ends with its clients, not at
	// its 4 s or the 30 s --timeout.
	if tr := p.Traffic; tr == nil || tr.DurationSec >= 4 || p.DurationSec >= 30 {
		t.Errorf("traffic %+v, point %.1f s: want the phase ended by the drop, before its 4 s", tr, p.DurationSec)
	}
	noChildren(t)
}
