// Package qemuwrap makes, for tests, a script that stands in for QEMU
// (softroce.BootConfig.QEMU): it records each QEMU's PID and starts the
// first few paused (-S: the vCPUs never run, a guest as silent as the
// TCG boot hang CI once saw), or fails every start, so that the boot
// retries of softroce and runner/vm can be tested on real guests.
package qemuwrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Wrapper is a wrapper script and the file its QEMUs' PIDs go to.
type Wrapper struct {
	// Path is the script, to be given as the QEMU binary.
	Path string
	pids string
}

// New writes a wrapper of qemu that starts the first paused QEMUs
// paused and the rest as they are; paused < 0 has every start fail
// ("wrapper: no QEMU") before QEMU runs. Guests started at once (a
// link's pair) take a lock, so that each counts those before it
// exactly.
func New(t testing.TB, qemu string, paused int) *Wrapper {
	t.Helper()
	dir := t.TempDir()
	w := &Wrapper{Path: filepath.Join(dir, "qemu"), pids: filepath.Join(dir, "pids")}
	// exec keeps the shell's PID, so the PID recorded is QEMU's.
	script := fmt.Sprintf(`#!/bin/sh
if [ %[2]d -lt 0 ]; then echo $$ >> %[1]s; echo "wrapper: no QEMU" >&2; exit 1; fi
exec 9>>%[1]s.lock
flock 9
echo $$ >> %[1]s
n=$(wc -l < %[1]s)
exec 9>&-
if [ "$n" -le %[2]d ]; then exec %[3]s "$@" -S; fi
exec %[3]s "$@"
`, w.pids, paused, qemu)
	if err := os.WriteFile(w.Path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// Reaped returns the PIDs of every QEMU the wrapper started, and fails
// t for each that still exists, even as a zombie.
func (w *Wrapper) Reaped(t testing.TB) []int {
	t.Helper()
	b, err := os.ReadFile(w.pids)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("QEMU pid %d still exists (kill 0: %v)", pid, err)
		}
		pids = append(pids, pid)
	}
	return pids
}
