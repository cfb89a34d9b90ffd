package sim

import (
	"context"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/internal/fabrictest"
)

// TestConformance holds the simulation to what every fabric must do,
// the suite fabric/verbs runs on rxe0 in the guest.
func TestConformance(t *testing.T) {
	fabrictest.Run(t, fabrictest.Fabric{
		// Each context its own simulated host, reaching the others over
		// its wire on 127.0.0.1.
		Open: func(tb testing.TB) fabric.Device {
			tb.Helper()
			dev, err := New(Options{}).Open(context.Background(), fabric.DeviceConfig{GIDIndex: -1})
			if err != nil {
				tb.Fatal(err)
			}
			return dev
		},
		DeviceErrnos: true,
	})
}
