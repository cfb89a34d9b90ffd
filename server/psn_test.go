package server

import (
	"testing"
	"time"
)

// Past the end of a small PSN space: every epoch issues each PSN once,
// a new key starts the next epoch, held PSNs are skipped, and a space
// held in full is an error, never a hang.
func TestPSNSpaceRunsOut(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		drawPastTheEnd(t)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("drawing PSNs from a 16-value space hangs")
	}
}

func drawPastTheEnd(t *testing.T) {
	const bits, size = 4, 16
	p := newPSNSource(bits)
	var orders [][]uint32
	for epoch := 1; epoch <= 3; epoch++ {
		seen := map[uint32]bool{}
		var order []uint32
		for range size {
			psn, err := p.draw()
			if err != nil {
				t.Errorf("epoch %d: %v", epoch, err)
				return
			}
			if psn >= size || seen[psn] {
				t.Errorf("epoch %d: PSN %d out of range or repeated (%v so far)", epoch, psn, order)
				return
			}
			seen[psn] = true
			order = append(order, psn)
			p.drop(psn)
		}
		if _, epochs := p.stats(); epochs != epoch {
			t.Errorf("after %d draws: %d epochs, want %d", epoch*size, epochs, epoch)
		}
		orders = append(orders, order)
	}
	// A new key gives a new order (16! orders: two equal ones by chance
	// in 3 epochs is a 1-in-10^13 event).
	if equal(orders[0], orders[1]) && equal(orders[1], orders[2]) {
		t.Errorf("every epoch issued PSNs in the same order %v: the key did not change", orders[0])
	}

	// Hold all but one: the next draw finds the free one, across epochs.
	var held []uint32
	for range size - 1 {
		psn, err := p.draw()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, psn)
	}
	last, err := p.draw()
	if err != nil {
		t.Fatalf("one PSN free: %v", err)
	}
	for _, h := range held {
		if h == last {
			t.Fatalf("PSN %d issued while a connected client holds it", last)
		}
	}
	if _, err := p.draw(); err == nil {
		t.Fatal("every PSN held, and draw issued one")
	}
	p.drop(held[3])
	if psn, err := p.draw(); err != nil || psn != held[3] {
		t.Fatalf("after one was dropped: %d, %v; want %d", psn, err, held[3])
	}
	if n, _ := p.stats(); n != size {
		t.Errorf("%d PSNs held, want %d", n, size)
	}
}

func equal(a, b []uint32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// The real space: a long run of PSNs within one epoch never repeats,
// holding none of them.
func TestPSNsDistinctWithinAnEpoch(t *testing.T) {
	p := newPSNSource(psnBits)
	const n = 200_000
	seen := make(map[uint32]struct{}, n)
	for i := range n {
		psn, err := p.draw()
		if err != nil {
			t.Fatal(err)
		}
		if psn >= 1<<psnBits {
			t.Fatalf("PSN %#x is wider than %d bits", psn, psnBits)
		}
		if _, dup := seen[psn]; dup {
			t.Fatalf("draw %d repeats PSN %#x", i, psn)
		}
		seen[psn] = struct{}{}
		p.drop(psn)
	}
	if held, epochs := p.stats(); held != 0 || epochs != 1 {
		t.Errorf("held %d, epochs %d; want 0 and 1", held, epochs)
	}
}
