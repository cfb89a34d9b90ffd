package vm

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// The host samples QEMU every interval while the guest's sampler backs
// off: each guest sample gets the one host reading nearest to it, never
// several readings of the same process.
func TestMergeHostSamples(t *testing.T) {
	qemu := func(t, cpu float64) result.Sample {
		return result.Sample{T: t, Procs: []result.ProcSample{{Role: "qemu", CPU: cpu}}}
	}
	host := []result.Sample{qemu(0.0, 1), qemu(0.5, 2), qemu(1.0, 3), qemu(1.5, 4), qemu(2.0, 5), qemu(2.5, 6), qemu(3.0, 7)}
	pt := result.Point{Samples: []result.Sample{
		{T: 0.1, Procs: []result.ProcSample{{Role: "server"}}},
		{T: 1.4},
		{T: 2.9},
		{T: 9},
	}}
	mergeHostSamples(&pt, host)
	want := []float64{1, 4, 7, 7}
	for i, s := range pt.Samples {
		var got []float64
		for _, p := range s.Procs {
			if p.Role == "qemu" {
				got = append(got, p.CPU)
			}
		}
		if len(got) != 1 || got[0] != want[i] {
			t.Errorf("sample %d at %.1f s: qemu readings %v, want [%v]", i, s.T, got, want[i])
		}
	}
	if len(pt.Samples[0].Procs) != 2 || pt.Samples[0].Procs[0].Role != "server" {
		t.Errorf("the guest's own readings: %+v", pt.Samples[0].Procs)
	}
	empty := result.Point{Samples: []result.Sample{{T: 1}}}
	mergeHostSamples(&empty, nil)
	if len(empty.Samples[0].Procs) != 0 {
		t.Errorf("no host readings: %+v", empty.Samples[0].Procs)
	}
}

// A guest, or --vm-peer's two, that the host's available memory cannot
// hold is refused in one line that says how much there is; one that fits
// is not, nor any where the host's memory is unknown.
func TestCheckHostMemory(t *testing.T) {
	host := map[string]uint64{"MemTotal": 24 << 30, "MemAvailable": 20 << 30}
	if err := checkHostMemory(12288, false, host); err != nil {
		t.Errorf("12 GiB of 20 available: %v", err)
	}
	err := checkHostMemory(12288, true, host)
	if err == nil || err.Error() != "--vm-peer's two guests of --vm-mem 12,288 MiB each do not fit in this host's memory: 20,480 MiB available of 24,576 MiB (MemAvailable); lower --vm-mem to at most 10,240" {
		t.Errorf("two 12 GiB guests of 20 available: %v", err)
	}
	err = checkHostMemory(32768, false, host)
	if err == nil || !strings.HasPrefix(err.Error(), "--vm-mem 32,768 MiB does not fit in this host's memory: 20,480 MiB available") {
		t.Errorf("32 GiB of 20 available: %v", err)
	}
	if err := checkHostMemory(1<<20, true, nil); err != nil {
		t.Errorf("no meminfo: %v", err)
	}
	if err := (GuestOptions{CPUs: 2, MemMiB: 128}).Check(); err == nil || !strings.Contains(err.Error(), "--vm-mem ≥ 256 MiB") {
		t.Errorf("128 MiB: %v", err)
	}
}
