//go:build !linux

package runner

import "os/exec"

// killOnParentDeath does nothing outside Linux (no Pdeathsig), where
// rdmaprobe runs no points: it reads and renders saved runs.
func killOnParentDeath(*exec.Cmd) {}
