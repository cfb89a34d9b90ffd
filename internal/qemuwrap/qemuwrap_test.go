package qemuwrap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A stand-in QEMU that prints its arguments shows which starts the
// wrapper paused, and every PID it recorded is gone once they exit.
func TestWrapper(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "qemu")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := New(t, fake, 1)
	var got []string
	for range 3 {
		out, err := exec.Command(w.Path, "-m", "1024").CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		got = append(got, strings.TrimSpace(string(out)))
	}
	if strings.Join(got, ",") != "-m 1024 -S,-m 1024,-m 1024" {
		t.Errorf("arguments %q, want only the first start paused", got)
	}
	if pids := w.Reaped(t); len(pids) != 3 {
		t.Errorf("%d PIDs recorded, want 3", len(pids))
	}

	fail := New(t, fake, -1)
	out, err := exec.Command(fail.Path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "wrapper: no QEMU") {
		t.Errorf("a failing wrapper: %v %q", err, out)
	}
	if pids := fail.Reaped(t); len(pids) != 1 {
		t.Errorf("%d PIDs recorded, want 1", len(pids))
	}
}
