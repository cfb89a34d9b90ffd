package testhosts

import "syscall"

// termOnParentDeath has the kernel send SIGTERM to a script whose parent
// (the test binary) dies.
func termOnParentDeath() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
