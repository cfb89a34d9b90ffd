package vm

import (
	"slices"
	"testing"
)

// What a run leaves in a shared guest is named, and nothing else: the
// state after boot is the reference, whatever it holds.
func TestGuestStateLeft(t *testing.T) {
	base := GuestState{
		Processes: []string{"45 dhclient"},
		RDMA:      map[string]map[string]int{"rxe0": {"qp": 1, "pd": 1}},
		Files:     []string{"/init", "/tmp/boot"},
		Sysctls:   map[string]string{"vm.max_map_count": "65530"},
	}
	if left := base.Left(base); len(left) != 0 {
		t.Errorf("the state after boot against itself: %q", left)
	}
	after := GuestState{
		Processes: []string{"45 dhclient", "812 rdmaprobe"},
		RDMA:      map[string]map[string]int{"rxe0": {"qp": 3, "pd": 1}},
		Files:     []string{"/init", "/tmp/cert.pem"},
		Sysctls:   map[string]string{"vm.max_map_count": "1000"},
		Peer:      true,
	}
	want := []string{
		"process 812 rdmaprobe",
		"file /tmp/cert.pem",
		"file gone: /tmp/boot",
		"rxe0 qp: 3, 1 after boot",
		"sysctl vm.max_map_count = 1000, 65530 after boot",
		"the agent's SSH launcher into a peer guest",
	}
	if left := after.Left(base); !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
}

// Only a run of the shared guest's shape, and not one with a peer guest,
// gets it.
func TestSharedFits(t *testing.T) {
	s := &Shared{Shape: GuestOptions{CPUs: 2, MemMiB: 2048}}
	for _, tc := range []struct {
		opts GuestOptions
		want bool
	}{
		{GuestOptions{CPUs: 2, MemMiB: 2048, MaxMapCount: 1000}, true},
		{GuestOptions{CPUs: 2, MemMiB: 2048, CPUModel: DefaultCPUModel}, true},
		{GuestOptions{CPUs: 2, MemMiB: 8192}, false},
		{GuestOptions{CPUs: 2, MemMiB: 2048, KernelArgs: []string{"nosmt"}}, false},
		{GuestOptions{CPUs: 2, MemMiB: 2048, CPUModel: "max"}, false},
		{GuestOptions{CPUs: 2, MemMiB: 2048, Peer: true}, false},
	} {
		if got := s.fits(tc.opts); got != tc.want {
			t.Errorf("fits(%+v) = %v", tc.opts, got)
		}
	}
	if (*Shared)(nil).fits(GuestOptions{CPUs: 2, MemMiB: 2048}) {
		t.Error("no Shared lends a guest")
	}
}
