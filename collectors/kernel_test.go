package collectors

import (
	"os"
	"runtime"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
	"golang.org/x/sys/unix"
)

// A guest's /proc/meminfo (Linux 6.1): the kept fields in bytes, the
// others (VmallocTotal, HugePages_Total) left out.
func TestParseMemInfo(t *testing.T) {
	data, err := os.ReadFile("testdata/proc_meminfo.txt")
	if err != nil {
		t.Fatal(err)
	}
	m := ParseMemInfo(data)
	want := map[string]uint64{"MemTotal": 8135284 << 10, "MemAvailable": 7412340 << 10, "Slab": 61232 << 10,
		"SUnreclaim": 41120 << 10, "VmallocUsed": 18944 << 10, "PageTables": 3124 << 10, "KernelStack": 2480 << 10}
	if len(m) != len(want) {
		t.Errorf("kept %d fields, want %d: %v", len(m), len(want), m)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %d, want %d", k, m[k], v)
		}
	}
	if got := result.KernelHeld(m); got != (61232+18944+3124+2480)<<10 {
		t.Errorf("kernel held %d", got)
	}
}

// The kernel's OOM lines are kept, its other records not.
func TestKmsgOOMLine(t *testing.T) {
	for rec, want := range map[string]string{
		"3,1234,98765432,-;Out of memory: Killed process 312 (rdmaprobe) total-vm:1234kB, anon-rss:200000kB\n":                      "Out of memory: Killed process 312 (rdmaprobe) total-vm:1234kB, anon-rss:200000kB",
		"4,1230,98765400,-;rdmaprobe invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0\n SUBSYSTEM=x": "rdmaprobe invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0",
		"6,1240,98765500,-;rdma_rxe: loaded\n": "",
		"no separator":                         "",
	} {
		if got := KmsgOOMLine(rec); got != want {
			t.Errorf("KmsgOOMLine(%q) = %q, want %q", rec, got, want)
		}
	}
}

// On Linux a watch reads this machine's memory three times; elsewhere
// there is none.
func TestWatchKernel(t *testing.T) {
	w := WatchKernel()
	if runtime.GOOS != "linux" {
		if w != nil {
			t.Fatal("a kernel watch off Linux")
		}
		return
	}
	w.Loaded()
	k := w.Finish()
	for name, m := range map[string]map[string]uint64{"before": k.Before, "loaded": k.Loaded, "after": k.After} {
		if m["MemTotal"] == 0 || m["MemAvailable"] == 0 || m["MemAvailable"] > m["MemTotal"] {
			t.Errorf("%s: %v", name, m)
		}
	}
}

// The kernel log's descriptor is not inherited by the processes a point
// starts: a server command under a low RLIMIT_NOFILE counts every fd.
func TestKernelWatchLogClosedOnExec(t *testing.T) {
	w := WatchKernel()
	if w == nil || w.kmsg < 0 {
		t.Skip("/dev/kmsg is not readable here")
	}
	defer w.Finish()
	flags, err := unix.FcntlInt(uintptr(w.kmsg), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("/dev/kmsg's fd %d has flags %#x, want FD_CLOEXEC", w.kmsg, flags)
	}
}
