package verbs

import (
	"strings"
	"syscall"
	"testing"
)

// A kernel without RDMA makes libibverbs fail with ENOSYS: the error says
// what is missing and what to do instead; other errnos keep their own text.
func TestDeviceListErrorSaysWhy(t *testing.T) {
	got := deviceListError(syscall.ENOSYS).Error()
	for _, want := range []string{"ibv_get_device_list: ENOSYS", "no RDMA devices", "rdma_rxe", "--backend sim"} {
		if !strings.Contains(got, want) {
			t.Errorf("ENOSYS: %q lacks %q", got, want)
		}
	}
	if got := deviceListError(syscall.EACCES).Error(); strings.Contains(got, "rdma_rxe") {
		t.Errorf("EACCES: %q gives the no-RDMA advice", got)
	}
}
