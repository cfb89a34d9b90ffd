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
