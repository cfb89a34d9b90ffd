package softroce

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
)

func qemuBinary(override string) (string, error) {
	name := "qemu-system-x86_64"
	if override != "" {
		name = override
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found: install the Debian package qemu-system-x86", name)
	}
	return p, nil
}

// Available reports whether the vm backend can run here: QEMU and a kernel
// with rdma_rxe must be installed.
func Available() (bool, string) {
	if runtime.GOOS != "linux" {
		return false, "the vm backend runs on Linux hosts only"
	}
	q, err := qemuBinary("")
	if err != nil {
		return false, err.Error()
	}
	rel, err := newestRxeKernel(hostRoot)
	if err != nil {
		return false, err.Error()
	}
	if f, err := os.Open("/boot/vmlinuz-" + rel); err != nil {
		return false, fmt.Sprintf("kernel /boot/vmlinuz-%s is not readable: %v", rel, err)
	} else {
		f.Close()
	}
	return true, fmt.Sprintf("%s and kernel %s with rdma_rxe", q, rel)
}
