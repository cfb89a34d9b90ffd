//go:build !linux

package command

import "syscall"

// becomeSubreaper does nothing where there is no PR_SET_CHILD_SUBREAPER:
// rdmaprobe runs its targets on Linux; elsewhere it only reads and
// renders saved runs.
func becomeSubreaper() {}

// sysProcAttr starts a program in a process group of its own (no
// Pdeathsig outside Linux).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
