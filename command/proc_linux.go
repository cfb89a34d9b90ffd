package command

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes this process its descendants' subreaper. Without
// it a target's orphans go to init, out of our reach: a server that forks
// workers and is killed would leave them running. Best effort: the call
// fails only on kernels before 3.4.
func becomeSubreaper() {
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// sysProcAttr starts a program in a process group of its own, with
// Pdeathsig: should this process die, the kernel kills the program, so
// no server or client outlives the harness.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
