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
// (as hex and as @file), bad hex, no server, and kinds that contradict
// --client-cmd.
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
		{append([]string{"--client-kind", "rdmacm", "--cm-private-data", strings.Repeat("ab", 57)}, srv...), "57 bytes: an RC connect request carries at most 56"},
		{append([]string{"--client-kind", "rdmacm", "--cm-private-data", "@" + big}, srv...), "57 bytes"},
		{append([]string{"--client-kind", "rdmacm", "--cm-private-data", "xyz"}, srv...), "want hex digits or @file"},
		{[]string{"--client-kind", "rdmacm"}, "needs an rdma_cm server: --server-cmd"},
		{append([]string{"--client-kind", "rdmacm", "--client-cmd", "true"}, srv...), "one or the other"},
		{append([]string{"--client-kind", "command"}, srv...), "needs --client-cmd"},
		{append([]string{"--client-kind", "tcp"}, srv...), "want builtin, rdmacm or command"},
		{append([]string{"--cm-private-data", "00"}, srv...), "goes with --client-kind rdmacm"},
		{append([]string{"--client-kind", "rdmacm", "--criterion", "traffic"}, srv...), "rdma_cm clients (--client-kind rdmacm) run no traffic phase"},
	}
	for _, c := range cases {
		args := append([]string{"ramp", "--backend", "sim", "--clients", "1", "--results", t.TempDir()}, c.args...)
		_, errOut, code := run(t, args...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, errOut, ExitUsage, c.want)
		}
	}
}

// rdma-core's own rdma_cm servers, held at 200 connections by one
// generator process of rdma_cm clients in the guest: cmtime's server
// (which posts no receives, so no traffic phase runs) and rping's
// persistent server, one attempt in flight at a time because Debian
// 12's rping -P accepts a request twice when requests overlap (see
// TestVMTargetRping). Every step of every connection is timed.
func TestVMRDMACMServers(t *testing.T) {
	needVM(t)
	needTool(t, "cmtime", "rdmacm-utils")
	needTool(t, "rping", "rdmacm-utils")
	const n = 200
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"cmtime", []string{"--server-cmd", "cmtime -b {addr} -p {port} -c {n}"}},
		{"rping", []string{"--server-cmd", "rping -s -P -a {addr} -p {port}", "--inflight", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			args := append([]string{"ramp", "--backend", "vm", "--clients", "200", "--client-kind", "rdmacm",
				"--calibrate", "0", "--vm-mem", "2048", "--timeout", "60s", "--results", root}, tc.args...)
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
