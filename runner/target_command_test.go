package runner

import (
	"net"
	"strconv"
	"testing"
)

// The server command's port comes from below the kernel's ephemeral
// range, where no outgoing connection takes it between the pick and the
// server's bind, and it is free.
func TestFreePortBelowEphemeral(t *testing.T) {
	lo := ephemeralLow()
	if lo <= lowPortFloor {
		t.Skipf("ephemeral range starts at %d: nothing below it to pick from", lo)
	}
	for range 5 {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < lowPortFloor || p >= lo {
			t.Fatalf("port %d outside [%d, %d)", p, lowPortFloor, lo)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d picked as free: %v", p, err)
		}
		l.Close()
	}
}
