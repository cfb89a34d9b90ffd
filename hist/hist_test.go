package hist

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// within reports whether got is within the histogram's precision of want.
func within(got, want int64) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return float64(d) <= float64(want)*1e-3+1
}

func TestQuantiles(t *testing.T) {
	h := Latency()
	for i := 1; i <= 10000; i++ {
		h.RecordDuration(time.Duration(i) * time.Microsecond)
	}
	tests := []struct {
		q    float64
		want int64
	}{
		{0.5, int64(5000 * time.Microsecond)},
		{0.9, int64(9000 * time.Microsecond)},
		{0.99, int64(9900 * time.Microsecond)},
		{0.999, int64(9990 * time.Microsecond)},
		{1, int64(10000 * time.Microsecond)},
	}
	for _, tc := range tests {
		if got := h.Quantile(tc.q); !within(got, tc.want) {
			t.Errorf("q%v = %d, want %d ±0.1%%", tc.q, got, tc.want)
		}
	}
	if h.Count() != 10000 {
		t.Errorf("count %d", h.Count())
	}
	if !within(h.Max(), int64(10*time.Millisecond)) || !within(h.Min(), int64(time.Microsecond)) {
		t.Errorf("min %d max %d", h.Min(), h.Max())
	}
}

func TestEmpty(t *testing.T) {
	h := Latency()
	if h.Count() != 0 || h.Quantile(0.99) != 0 || h.Max() != 0 || h.Min() != 0 || h.Mean() != 0 {
		t.Errorf("empty histogram: count %d p99 %d max %d min %d mean %v", h.Count(), h.Quantile(0.99), h.Max(), h.Min(), h.Mean())
	}
}

func TestClamp(t *testing.T) {
	h := Counts()
	h.Record(-5)
	h.Record(MaxCount * 4)
	if h.Clamped() != 1 || h.Count() != 2 || h.Min() != 0 {
		t.Errorf("clamped %d count %d min %d", h.Clamped(), h.Count(), h.Min())
	}
	if !within(h.Max(), MaxCount) {
		t.Errorf("max %d, want about %d", h.Max(), MaxCount)
	}
}

// Merging per-generator histograms gives the histogram of all values,
// bucket for bucket, which averaging their percentiles would not.
func TestMergeEqualsWhole(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	whole, a, b := Latency(), Latency(), Latency()
	for i := 0; i < 50000; i++ {
		// Two generators with different latency distributions.
		v := int64(rng.ExpFloat64() * 20e3)
		if i%2 == 0 {
			v *= 10
		}
		whole.Record(v)
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	m := Latency()
	m.Merge(a)
	m.Merge(b)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		if m.Quantile(q) != whole.Quantile(q) {
			t.Errorf("q%v: merged %d, whole %d", q, m.Quantile(q), whole.Quantile(q))
		}
	}
	m.Merge(nil)
	if m.Count() != whole.Count() {
		t.Errorf("count %d, want %d", m.Count(), whole.Count())
	}
}

func TestJSONRoundTripAndSize(t *testing.T) {
	small, large := Latency(), Latency()
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 100000; i++ {
		small.Record(int64(5e3 + rng.NormFloat64()*1e3))
	}
	for i := 0; i < 2000000; i++ {
		large.Record(int64(5e3 + rng.NormFloat64()*1e3))
	}
	large.Record(MaxLatency * 2) // clamped, and kept through JSON
	bs, err := json.Marshal(small)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := json.Marshal(large)
	if err != nil {
		t.Fatal(err)
	}
	// 20 times the values, not 20 times the bytes: the size follows the
	// spread of the values, not their number.
	if len(bl) > 2*len(bs) || len(bl) > 8192 {
		t.Errorf("encoded sizes: %d bytes for 1e5 values, %d for 2e6", len(bs), len(bl))
	}
	var back Hist
	if err := json.Unmarshal(bl, &back); err != nil {
		t.Fatal(err)
	}
	if back.Count() != large.Count() || back.Clamped() != 1 {
		t.Fatalf("decoded count %d clamped %d, want %d and 1", back.Count(), back.Clamped(), large.Count())
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		if back.Quantile(q) != large.Quantile(q) {
			t.Errorf("q%v: decoded %d, want %d", q, back.Quantile(q), large.Quantile(q))
		}
	}
}

func TestUnmarshalRejects(t *testing.T) {
	for _, in := range []string{
		`"x"`,
		`{"hdr":"not base64!"}`,
		`{"hdr":"AAAA"}`,
		`{"hdr":"` + strings.Repeat("A", maxEncoded+4) + `"}`,
		`{"hdr":"","clamped":-1}`,
	} {
		var h Hist
		if err := json.Unmarshal([]byte(in), &h); err == nil {
			t.Errorf("accepted %.40s", in)
		}
	}
}
