package testhosts

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Binary builds rdmaprobe (this module's command) into the test's
// temporary directory and returns its path: what a launcher copies to,
// or finds on, its hosts. A test binary cannot stand in for it: started
// on another host, it would run its tests.
func Binary(t testing.TB) string {
	t.Helper()
	root := filepath.Join(scriptsDir(), "..")
	out := filepath.Join(t.TempDir(), "rdmaprobe")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not in $PATH: cannot build rdmaprobe for the hosts")
	}
	cmd := exec.Command(gobin, "build", "-o", out, ".")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build rdmaprobe: %v\n%s", err, b)
	}
	return out
}
