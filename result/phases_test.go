package result

import "testing"

// A phase falls in the first bucket whose bound it does not pass, a bound
// itself included; one past the last bound falls in the extra bucket.
func TestPhaseBucket(t *testing.T) {
	if len(PhaseBounds) != 20 || PhaseBounds[0] != 0.0001 || PhaseBounds[19] != 0.0001*(1<<19) {
		t.Fatalf("bounds %v: want 100 µs doubling 20 times", PhaseBounds)
	}
	for _, tc := range []struct {
		us   int64
		want int
	}{
		{0, 0},
		{100, 0},
		{101, 1},
		{200, 1},
		{1_000, 4}, // 0.8 ms < 1 ms <= 1.6 ms
		{52_428_800, 19},
		{52_428_801, 20},
		{1 << 40, 20},
	} {
		if got := PhaseBucket(tc.us); got != tc.want {
			t.Errorf("PhaseBucket(%d µs) = %d, want %d", tc.us, got, tc.want)
		}
	}
}
