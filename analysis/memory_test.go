package analysis

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

func meminfo(totalMiB, availMiB, slabMiB uint64) map[string]uint64 {
	return map[string]uint64{"MemTotal": totalMiB << 20, "MemAvailable": availMiB << 20, "Slab": slabMiB << 20}
}

// A server the OOM killer ended is the memory wall, named with the
// kernel's own evidence; the same death without an OOM kill is not.
func TestDiagnoseOOMKill(t *testing.T) {
	pt := failedPoint(300, 0, result.OutcomeTimeout, "", "server died during the point")
	pt.Error = "server died during the point: server exited: signal: killed"
	pt.KernelMemory = &result.KernelMemory{Before: meminfo(512, 400, 20), Loaded: meminfo(512, 9, 60), After: meminfo(512, 380, 25),
		OOMKills: 1, OOMLog: []string{"Out of memory: Killed process 312 (rdmaprobe) total-vm:1803548kB, anon-rss:301232kB"}}
	d := Diagnose(pt, result.Limits{}, result.Limits{}, 300)
	if d == nil || d.Limit != "memory" {
		t.Fatalf("diagnosis %+v", d)
	}
	for _, s := range []string{"300 clients failed (timeout), 0 of 300 connected", "OOM killer killed 1 process during the point", "signal: killed"} {
		if !strings.Contains(d.Summary, s) {
			t.Errorf("summary %q lacks %q", d.Summary, s)
		}
	}
	ev := strings.Join(d.Evidence, "\n")
	for _, s := range []string{"oom_kill rose by 1", "the kernel said: Out of memory: Killed process 312", "MemAvailable 9 MiB of MemTotal 512 MiB with the clients held"} {
		if !strings.Contains(ev, s) {
			t.Errorf("evidence lacks %q:\n%s", s, ev)
		}
	}
	if !strings.Contains(d.Suggestion, "--vm-mem") {
		t.Errorf("suggestion %q", d.Suggestion)
	}
	pt.KernelMemory.OOMKills, pt.KernelMemory.OOMLog = 0, nil
	pt.KernelMemory.Loaded = meminfo(512, 300, 60)
	if d := Diagnose(pt, result.Limits{}, result.Limits{}, 300); d == nil || d.Limit == "memory" {
		t.Errorf("no OOM kill, plenty available, yet %+v", d)
	}
}

// An allocation the machine refused is the memory wall: the Go runtime
// out of memory, or a verb's ENOMEM with next to nothing available. A
// verb's ENOMEM with memory to spare is not.
func TestDiagnoseAllocationFailure(t *testing.T) {
	pt := failedPoint(1000, 600, result.OutcomeQPCreate, "ENOMEM", "server: qp-create: ibv_create_qp: ENOMEM (cannot allocate memory)")
	pt.KernelMemory = &result.KernelMemory{Before: meminfo(1024, 800, 20), Loaded: meminfo(1024, 30, 200)}
	d := Diagnose(pt, result.Limits{MaxMapCount: 65530}, result.Limits{MaxMapCount: 65530}, 1000)
	if d == nil || d.Limit != "memory" || !strings.Contains(d.Summary, "400 clients failed (ibv_create_qp: ENOMEM), 600 of 1,000 connected; the machine had 30 MiB of memory available") {
		t.Fatalf("diagnosis %+v", d)
	}
	pt.KernelMemory.Loaded = meminfo(1024, 700, 40)
	if d := Diagnose(pt, result.Limits{MaxMapCount: 65530}, result.Limits{MaxMapCount: 65530}, 1000); d == nil || d.Limit == "memory" {
		t.Errorf("700 MiB of 1 GiB available, yet %+v", d)
	}

	// A registration larger than all the machine had (a 384 MiB guest,
	// 64 clients' 12 MiB buffers at once), with plenty left after.
	pt = failedPoint(100, 0, result.OutcomeQPCreate, "ENOMEM", "register buffers for 64 clients (805306368 bytes): ibv_reg_mr: ENOMEM (cannot allocate memory): 805306368 bytes")
	pt.KernelMemory = &result.KernelMemory{Before: meminfo(331, 254, 19), Loaded: meminfo(331, 234, 20)}
	d = Diagnose(pt, result.Limits{MemlockBytes: -1}, result.Limits{MemlockBytes: -1}, 100)
	if d == nil || d.Limit != "memory" || !strings.Contains(d.Summary, "100 clients failed (ibv_reg_mr: ENOMEM), 0 of 100 connected; the verb asked for 768 MiB, more than the 254 MiB the machine had available") {
		t.Fatalf("diagnosis %+v", d)
	}

	pt = failedPoint(1000, 0, result.OutcomeTimeout, "", "server died during the point")
	pt.Error = "server died during the point: server exited: exit status 2: fatal error: runtime: out of memory"
	d = Diagnose(pt, result.Limits{}, result.Limits{}, 1000)
	if d == nil || d.Limit != "memory" || !strings.Contains(d.Summary, "an allocation failed (out of memory): server died during the point: server exited: exit status 2: fatal error: runtime: out of memory") {
		t.Fatalf("diagnosis %+v", d)
	}
}
