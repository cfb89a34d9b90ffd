package runner

import (
	"os/exec"
	"syscall"
)

// killOnParentDeath sets Pdeathsig: if rdmaprobe itself dies, the kernel
// kills its children, so no server or generator outlives the tool.
func killOnParentDeath(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
