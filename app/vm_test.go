package app

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// needVM skips when QEMU or the guest kernel is missing; CI installs both
// (scripts/setup.sh), so there these tests run.
func needVM(t *testing.T) {
	t.Helper()
	if ok, why := softroce.Available(); !ok {
		t.Skip("no Soft-RoCE guest: " + why)
	}
}

// 64 real clients on real rxe in the guest, with verified round trips.
func TestVMRealSoftRoCE(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "64", "--rounds", "2",
		"--vm-mem", "2048", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if r.Backend.Simulated || !strings.HasPrefix(r.Backend.Description, "vm: rxe0 on Linux ") {
		t.Errorf("backend %+v", r.Backend)
	}
	p := r.Points[0]
	if p.Connected != 64 || p.SuccessRate != 1 {
		t.Fatalf("64 clients: %d connected, outcomes %v, errors %v", p.Connected, p.Outcomes, p.Errors)
	}
	if p.Server.PeakActive != 64 || p.Server.Released != 64 {
		t.Errorf("server view %+v", p.Server)
	}
	if d := r.Environment.Device; d == nil || d.Name != "rxe0" || d.Caps.MaxQP < 1000 || d.Port.GID.String() != "::ffff:127.0.0.1" {
		t.Errorf("device %+v", r.Environment.Device)
	}
	if ref := r.Environment.Reference; ref == nil || ref.Figures["usec/iter"] <= 0 {
		t.Errorf("reference check %+v", r.Environment.Reference)
	}
	qpns := map[uint32]bool{}
	for _, rec := range p.Records {
		if rec.RemoteQPN == 0 || qpns[rec.RemoteQPN] {
			t.Fatalf("server QPN %d missing or repeated", rec.RemoteQPN)
		}
		qpns[rec.RemoteQPN] = true
		if len(rec.RTTsUS) != 2 {
			t.Fatalf("record without 2 verified round trips: %+v", rec)
		}
	}
}

// More clients than --max-clients: the extra ones are refused, and a real
// resource limit (vm.max_map_count lowered in the guest) fails QP creation
// with the verb and errno recorded.
func TestVMRealLimits(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "vm", "--clients", "40", "--max-clients", "30",
		"--rounds", "1", "--vm-mem", "2048", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	p := loadOnlyRun(t, root).Points[0]
	if p.Connected != 30 || p.Outcomes[result.OutcomeRefused] != 10 {
		t.Errorf("40 clients with max 30: %d connected, outcomes %v", p.Connected, p.Outcomes)
	}

	root = t.TempDir()
	out, errOut, code = run(t, "ramp", "--backend", "vm", "--clients", "300", "--rounds", "1",
		"--vm-mem", "2048", "--vm-max-map-count", "1000", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	p = loadOnlyRun(t, root).Points[0]
	if p.Outcomes[result.OutcomeQPCreate] == 0 {
		t.Fatalf("max_map_count 1000: no qp-create failures; outcomes %v errors %v", p.Outcomes, p.Errors)
	}
	var withErrno int
	for _, rec := range p.Records {
		if rec.Outcome == result.OutcomeQPCreate && rec.Errno == "ENOMEM" && strings.Contains(rec.Error, "ibv_create_") {
			withErrno++
		}
	}
	if withErrno == 0 {
		t.Errorf("qp-create failures do not name the verb and ENOMEM: %v", p.Errors)
	}
}
