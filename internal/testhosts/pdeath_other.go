//go:build !linux

package testhosts

import "syscall"

// termOnParentDeath: no Pdeathsig outside Linux, where the test hosts
// (network namespaces) do not exist anyway.
func termOnParentDeath() *syscall.SysProcAttr { return nil }
