// Package parts decides what a test does when a part it needs from
// outside Go is missing: QEMU and the guest kernel, a Debian tool (rping,
// cmtime, sshd, Slurm, Prometheus, chromium), root. It skips with the
// reason, so that `go test ./...` works on any machine; but `make test`
// installs every part first (scripts/setup.sh) and then sets
// RDMAPROBE_REQUIRE_PARTS=1, and under it a missing part fails the test
// instead: CI cannot pass by skipping what it is there to run.
package parts

import (
	"fmt"
	"os"
	"testing"
)

// Env is the variable that turns a missing part into a failure.
const Env = "RDMAPROBE_REQUIRE_PARTS"

// Required says whether missing parts fail tests.
func Required() bool { return os.Getenv(Env) == "1" }

// Missing ends t because a part it needs is missing: a skip with the
// reason, or a failure when Required.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (%s=1: make test installed every part, so a missing one is a failure)", why, Env)
		return // a real t never gets here; a stand-in that records does
	}
	t.Skip(why)
}
