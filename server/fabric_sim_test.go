//go:build !verbs || !cgo

package server_test

import (
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
)

// timeScale is how much slower than the host the device's machine runs
// (tests size their load and waits by it); sim runs on the host.
const timeScale = 1

// testFabric: the server (with opts: caps, a service delay) and the
// clients each on their own simulated device; the server's device is the
// one counted.
func testFabric(t *testing.T, opts sim.Options) fabricUnderTest {
	srv := sim.New(opts)
	return fabricUnderTest{server: srv, client: sim.New(sim.Options{}), inUse: srv.InUse,
		clientIdle: map[string]int{}, clientHeld: func(int) map[string]int { return nil }}
}
