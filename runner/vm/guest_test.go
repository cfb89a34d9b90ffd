package vm

import (
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
