package payload

import "testing"

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
