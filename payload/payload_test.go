package payload

import (
	"fmt"
	"strings"
	"testing"
)

func TestFillCheck(t *testing.T) {
	for _, n := range []int{HeaderLen, 13, 64, 4096} {
		b := make([]byte, n)
		Fill(b, 42, n)
		seq, err := Check(b)
		if err != nil || seq != 42 {
			t.Fatalf("n=%d: seq %d err %v", n, seq, err)
		}
		if n > HeaderLen {
			b[n-1] ^= 1
			if _, err := Check(b); err == nil {
				t.Errorf("n=%d: corrupted payload passed", n)
			}
		}
	}
	if _, err := Check(make([]byte, 3)); err != ErrShort {
		t.Errorf("short payload: %v", err)
	}
	a, b := make([]byte, 64), make([]byte, 64)
	Fill(a, 1, 64)
	Fill(b, 2, 64)
	if string(a[HeaderLen:]) == string(b[HeaderLen:]) {
		t.Error("filler does not depend on the sequence")
	}
}

// Every length fills (the tail past the last 8 bytes too), and Seq reads
// the header.
func TestFillLengths(t *testing.T) {
	for n := HeaderLen; n <= HeaderLen+17; n++ {
		b := make([]byte, n)
		Fill(b, 7, n)
		if seq, err := Check(b); err != nil || seq != 7 || Seq(b) != 7 {
			t.Fatalf("n=%d: seq %d (Seq %d) err %v", n, seq, Seq(b), err)
		}
		if n > HeaderLen {
			b[n-1] ^= 0x80
			if _, err := Check(b); err == nil {
				t.Errorf("n=%d: last byte corrupted, check passed", n)
			}
		}
	}
	if Seq([]byte{1}) != 0 {
		t.Error("Seq of a short buffer")
	}
}

func BenchmarkFill4K(b *testing.B) {
	buf := make([]byte, 4096)
	b.SetBytes(4096)
	for i := 0; i < b.N; i++ {
		Fill(buf, uint64(i), 4096)
	}
}

// Every single-bit flip, in the header or the filler, fails the check
// and is reported at its byte; so do a message cut short or run long by
// a byte and another message's bytes.
func TestCheckCatchesEveryFlip(t *testing.T) {
	for _, n := range []int{HeaderLen, HeaderLen + 1, 21, 64, 100} {
		b := make([]byte, n)
		Fill(b, 0x1234, n)
		for i := 0; i < n; i++ {
			for bit := 0; bit < 8; bit++ {
				b[i] ^= 1 << bit
				_, err := Check(b)
				b[i] ^= 1 << bit
				if err == nil {
					t.Fatalf("n=%d: bit %d of byte %d flipped, check passed", n, bit, i)
				}
				if i >= HeaderLen && !strings.Contains(err.Error(), fmt.Sprintf("at byte %d of %d", i, n)) {
					t.Fatalf("n=%d: flip at byte %d reported as %v", n, i, err)
				}
			}
		}
		if _, err := Check(b); err != nil {
			t.Fatalf("n=%d: intact message after the flips: %v", n, err)
		}
	}
	long := make([]byte, 4097)
	Fill(long, 9, 4096)
	long[4096] = 0x5a // one byte of anything past the message
	for _, m := range [][]byte{long[:4095], long} {
		if _, err := Check(m); err == nil {
			t.Errorf("a 4096-byte message checked as %d bytes passed", len(m))
		}
	}
	other := make([]byte, 4096)
	Fill(other, 10, 4096)
	copy(other[:HeaderLen], long[:HeaderLen]) // message 10's filler under message 9's header
	if _, err := Check(other); err == nil {
		t.Error("another message's filler passed")
	}
}

// The sequences at the edges: 0, Bye, a region's, and the one whose
// seed would be 0.
func TestCheckEdgeSequences(t *testing.T) {
	// seq·0x9e3779b97f4a7c15 == 64·0xd1b54a32d192ed03 (mod 2^64), by
	// Newton's iteration for the multiplier's inverse.
	mul, lenMul := uint64(0x9e3779b97f4a7c15), uint64(0xd1b54a32d192ed03)
	inv := mul
	for i := 0; i < 6; i++ {
		inv *= 2 - mul*inv
	}
	zero := 64 * lenMul * inv
	if seed(zero, 64) != 1 {
		t.Fatalf("seed(%#x, 64) = %#x, want the fallback 1", zero, seed(zero, 64))
	}
	for _, seq := range []uint64{0, 1, Bye, RegionSeq(0xffffff, 3), zero} {
		b := make([]byte, 64)
		Fill(b, seq, 64)
		if got, err := Check(b); err != nil || got != seq {
			t.Errorf("seq %#x: %#x, %v", seq, got, err)
		}
	}
}

func BenchmarkCheck4K(b *testing.B) {
	buf := make([]byte, 4096)
	Fill(buf, 7, 4096)
	b.SetBytes(4096)
	for i := 0; i < b.N; i++ {
		if _, err := Check(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// CheckSize takes what Fill and Check can carry and nothing else.
func TestCheckSize(t *testing.T) {
	for _, n := range []int{HeaderLen, 13, 4096, MaxSize} {
		if err := CheckSize(n); err != nil {
			t.Errorf("%d bytes refused: %v", n, err)
		}
	}
	for _, n := range []int{-1, 0, 8, HeaderLen - 1, MaxSize + 1} {
		if err := CheckSize(n); err == nil {
			t.Errorf("%d bytes taken", n)
		}
	}
}

func TestMuxSeq(t *testing.T) {
	for _, c := range []struct {
		id uint32
		n  uint64
	}{{0, 1}, {1, 1}, {7, 123456}, {1<<LogicalBits - 1, 1<<40 - 1}} {
		seq := MuxSeq(c.id, c.n)
		if Logical(seq) != c.id || seq&(1<<40-1) != c.n {
			t.Errorf("MuxSeq(%d, %d) = %#x: logical %d", c.id, c.n, seq, Logical(seq))
		}
		b := make([]byte, 64)
		Fill(b, seq, len(b))
		if got, err := Check(b); err != nil || Logical(got) != c.id {
			t.Errorf("message of logical %d checks as %#x, %v", c.id, got, err)
		}
		// Another logical client's message of the same count is another
		// message: a rewritten ID fails the check.
		b[2] ^= 1
		if _, err := Check(b); err == nil {
			t.Errorf("logical %d: a rewritten ID passed the check", c.id)
		}
	}
	if MuxSeq(0, 5) != 5 {
		t.Error("logical 0's sequences are not the plain counts")
	}
}
