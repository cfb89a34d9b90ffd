//go:build verbs && cgo

package server_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
	"github.com/rdmaprobe/rdmaprobe/fabric/verbs"
)

// timeScale is how much slower than the host the device's machine runs
// (tests size their load and waits by it): the only device these tests
// meet is rxe0 in the QEMU TCG guest, where crypto runs ~15x slower.
var timeScale = func() time.Duration {
	if ents, err := os.ReadDir("/sys/class/infiniband"); err == nil && len(ents) > 0 {
		return 8
	}
	return 1
}()

// testFabric: built with the verbs tag and run where an RDMA device exists
// (the Soft-RoCE guest: TestGuestSuites in internal/guestsuites), the server and clients
// share the real device and the kernel's own resource count is watched.
// Elsewhere it falls back to sim (with caps; a real device has its own).
func testFabric(t *testing.T, opts sim.Options) fabricUnderTest {
	ents, err := os.ReadDir("/sys/class/infiniband")
	if err != nil || len(ents) == 0 {
		srv := sim.New(opts)
		return fabricUnderTest{server: srv, client: sim.New(sim.Options{}), inUse: srv.InUse,
			clientIdle: map[string]int{}, clientHeld: func(int) map[string]int { return nil }}
	}
	dev := ents[0].Name()
	t.Logf("fabric: verbs on %s, counted by the kernel", dev)
	count := func() map[string]int {
		m, err := collectors.DeviceResources(dev)
		if err != nil {
			t.Fatalf("resource count of %s: %v", dev, err)
		}
		return map[string]int{"pd": m["pd"], "cq": m["cq"], "mr": m["mr"], "qp": m["qp"], "srq": m["srq"]}
	}
	p := verbs.New()
	d, err := p.Open(context.Background(), fabric.DeviceConfig{Name: dev, GIDIndex: -1})
	if err != nil {
		t.Fatalf("open %s: %v", dev, err)
	}
	per := client.GroupSize(d.Caps(), 1)
	d.Close()
	// The clients' dialer keeps its PD until the test ends; each
	// connected client holds a QP on the same device, its CQ is shared
	// by up to client.GroupSize clients, and its buffers come from
	// regions of client.SlabClients clients each.
	return fabricUnderTest{server: p, client: p, inUse: count, clientIdle: map[string]int{"pd": 1},
		clientHeld: func(n int) map[string]int {
			return map[string]int{"qp": n, "cq": (n + per - 1) / per, "mr": (n + client.SlabClients - 1) / client.SlabClients}
		}}
}
