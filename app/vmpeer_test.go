package app

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// TestVMPeer is Soft-RoCE across two hosts: two guests on a virtual link,
// the server in one and the load generators in the other, started over
// SSH (sshd in the second guest). 50 clients connect at 100% with
// verified round trips and then exchange messages, each guest's kernel
// counts the QPs of its side on the link's device, the perftest
// references ran across the link, and both QEMUs are gone after.
//
// Own boot: two guests on a link are what it tests.
func TestVMPeer(t *testing.T) {
	needVM(t)
	for _, tool := range []string{"ssh", "ssh-keygen", "/usr/sbin/sshd"} {
		// CI installs openssh-server and -client (scripts/setup.sh).
		if _, err := exec.LookPath(tool); err != nil {
			parts.Missing(t, "%s not installed (openssh-server, openssh-client)", tool)
		}
	}
	root := t.TempDir()
	// Two TCG guests on a loaded 2-core host connect a few clients a
	// second (measured 14-20/s here; one run with other tests beside it
	// had clients wait past the default 60 s, and the server, whose
	// deadline is the clients', closed them): what is tested is the
	// link, not the speed, so each client may take 3 minutes (and a few
	// dozen clients show it).
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--vm-peer", "--clients", "50", "--rounds", "2",
		"--timeout", "3m", "--vm-mem", "2048", "--calibrate", "0", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if !strings.HasPrefix(r.Backend.Description, "vm: rxe2 on eth0 (169.254.77.1/24)") || !strings.Contains(r.Backend.Description, "second guest") {
		t.Errorf("backend %q", r.Backend.Description)
	}
	if d := r.Environment.Device; d == nil || d.Name != "rxe2" || d.Port.GID.String() != "::ffff:169.254.77.1" {
		t.Errorf("server's device %+v", r.Environment.Device)
	}
	if len(r.Hosts) != 1 || r.Hosts[0].Addr != "169.254.77.2" || r.Hosts[0].Environment == nil ||
		r.Hosts[0].Environment.Device == nil || r.Hosts[0].Environment.Device.Name != "rxe2" || r.Config.Launcher != "ssh" {
		t.Errorf("generator hosts %+v, launcher %q", r.Hosts, r.Config.Launcher)
	}
	// perftest ran where the traffic did: its server in the server's
	// guest, its client in the generators' guest, over rxe2.
	if r.Environment.Reference == nil {
		t.Fatal("no reference recorded")
	}
	var bw float64
	for _, ref := range append([]result.Reference{*r.Environment.Reference}, r.Environment.DataPath...) {
		if ref.Error != "" || !strings.HasPrefix(ref.Where, "across the link") || !strings.Contains(ref.Command, "-d rxe2 ") ||
			!strings.HasSuffix(ref.Command, " 169.254.77.1") {
			t.Errorf("reference not taken across the link: %+v", ref)
		}
		if ref.Tool == "ib_send_bw" {
			bw = ref.Figures["msg/s"]
		}
	}
	if len(r.Environment.DataPath) == 0 || bw <= 0 {
		t.Errorf("no cross-link ib_send_bw figure: %+v", r.Environment.DataPath)
	}
	p := r.Points[0]
	if p.Connected != 50 || p.SuccessRate != 1 || p.RTT.N < 100 {
		t.Fatalf("50 clients: %d connected, %d verified round trips, outcomes %v, errors %v, point error %q", p.Connected, p.RTT.N, p.Outcomes, p.Errors, p.Error)
	}
	// The server's guest counts its side (above the baseline before the
	// point), the generators' guest its own: each has 50 QPs on rxe2.
	if pk := p.Peak; pk == nil || pk.RDMA["qp"] != 50 || pk.ByRole["server"]["qp"] != 50 {
		t.Errorf("the server guest's kernel: %+v, want 50 QPs on rxe2, all the server's", p.Peak)
	}
	// The default traffic phase ran across the link, and the server
	// said its CPU in it (serve's usage request).
	if tr := p.Traffic; tr == nil || tr.Error != "" || tr.Messages == 0 || tr.ErrorCount() != 0 || tr.ServerCPU <= 0 {
		t.Errorf("traffic phase %+v", p.Traffic)
	}
	if len(p.Hosts) != 1 {
		t.Fatalf("point hosts %+v", p.Hosts)
	}
	h := p.Hosts[0]
	if h.Connected != 50 || h.GID != "::ffff:169.254.77.2" || len(h.Usage) != 1 || h.Usage[0].RDMA["qp"] < 50 {
		t.Errorf("the generators' guest: %+v", h)
	}
	if kids := children(t); len(kids) != 0 {
		t.Errorf("child processes left: %v", kids)
	}
}
