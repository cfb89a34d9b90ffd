//go:build verbs && cgo

package verbs

import (
	"context"
	"os"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/internal/fabrictest"
)

// TestConformance holds the device to what every fabric must do, the
// suite fabric/sim runs too; internal/guestsuites' TestGuestSuites runs it on rxe0 in
// the Soft-RoCE guest and fails unless it passed there.
func TestConformance(t *testing.T) {
	dev := openDev(t, -1)
	fabrictest.Run(t, fabrictest.Fabric{
		Open: func(tb testing.TB) fabric.Device {
			tb.Helper()
			d, err := New().Open(context.Background(), fabric.DeviceConfig{Name: os.Getenv("RDMAPROBE_DEVICE"), GIDIndex: -1})
			if err != nil {
				tb.Fatalf("open: %v", err)
			}
			return d
		},
		// The errnos of the device's own checks are rxe's; other
		// providers need only refuse.
		DeviceErrnos: isRXE(dev),
	})
}
