// Package hist holds the histograms of the traffic phase: message
// latencies and per-client message counts, recorded by each load
// generator, merged across generators by the runner and saved in the run
// JSON. They are HDR histograms (github.com/HdrHistogram/hdrhistogram-go):
// fixed relative precision over a fixed range, so a histogram's size does
// not grow with the number of values recorded, and two histograms with the
// same range merge exactly (bucket by bucket), which a list of sampled
// percentiles cannot do.
//
// In JSON a histogram is one string, the HdrHistogram V2 compressed
// encoding (zlib, base64) that the Java, C and Python HdrHistogram
// libraries read too: typically a few hundred bytes to a few KiB,
// whatever the duration of the phase.
package hist

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Digits is the precision of every histogram: 3 significant decimal
// digits, so a recorded value is within 0.1% of the true one (10 ns at
// 10 µs, 1 µs at 1 ms).
const Digits = 3

// Ranges. Latencies are nanoseconds up to an hour: a message outstanding
// longer than that has failed long before. Counts go to 2^40.
const (
	MaxLatency = int64(time.Hour)
	MaxCount   = int64(1) << 40
)

// Hist is a histogram of non-negative integers (nanoseconds for
// latencies). The zero value is not usable: use Latency or Counts. It is
// not safe for concurrent use; each recording goroutine keeps its own and
// the owner merges them.
type Hist struct {
	h *hdr.Histogram
	// Clamped counts values above the range, recorded as the maximum.
	clamped int64
}

// Latency returns an empty histogram for durations of 1 ns to MaxLatency.
func Latency() *Hist { return &Hist{h: hdr.New(1, MaxLatency, Digits)} }

// Counts returns an empty histogram for counts of 1 to MaxCount.
func Counts() *Hist { return &Hist{h: hdr.New(1, MaxCount, Digits)} }

// Record adds one value; negative values count as 0 and values above the
// range as its maximum.
func (h *Hist) Record(v int64) {
	if v < 0 {
		v = 0
	}
	if hi := h.h.HighestTrackableValue(); v > hi {
		v = hi
		h.clamped++
	}
	_ = h.h.RecordValue(v) // in range: cannot fail
}

// RecordDuration adds one latency.
func (h *Hist) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds o's values to h. Values outside h's range (a histogram
// decoded from a wider one) are recorded as h's maximum and counted as
// clamped.
func (h *Hist) Merge(o *Hist) {
	if o == nil || o.h == nil {
		return
	}
	if dropped := h.h.Merge(o.h); dropped > 0 {
		_ = h.h.RecordValues(h.h.HighestTrackableValue(), dropped)
		h.clamped += dropped
	}
	h.clamped += o.clamped
}

// Count is the number of values recorded.
func (h *Hist) Count() int64 { return h.h.TotalCount() }

// Quantile returns the value at quantile q in [0, 1] (0.5 = median), 0
// for an empty histogram.
func (h *Hist) Quantile(q float64) int64 { return h.h.ValueAtPercentile(q * 100) }

// Min is the smallest value recorded (within the precision), 0 when
// empty.
func (h *Hist) Min() int64 { return h.h.Min() }

// Max is the largest value recorded (within the precision), 0 when empty.
func (h *Hist) Max() int64 {
	if h.Count() == 0 {
		return 0
	}
	return h.h.Max()
}

// Mean of the values recorded, 0 when empty.
func (h *Hist) Mean() float64 {
	if h.Count() == 0 {
		return 0
	}
	return h.h.Mean()
}

// Clamped counts values that were above the range and recorded as its
// maximum.
func (h *Hist) Clamped() int64 { return h.clamped }

// encoded is the JSON form: the V2 compressed encoding, and the clamped
// count when there is one.
type encoded struct {
	HDR     string `json:"hdr"`
	Clamped int64  `json:"clamped,omitempty"`
}

// MarshalJSON writes the V2 compressed encoding.
func (h *Hist) MarshalJSON() ([]byte, error) {
	b, err := h.h.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("encode histogram: %w", err)
	}
	return json.Marshal(encoded{HDR: string(b), Clamped: h.clamped})
}

// maxEncoded bounds what UnmarshalJSON decodes: a compressed histogram of
// our ranges is a few KiB; anything far larger is not one of ours.
const maxEncoded = 1 << 20

// UnmarshalJSON reads what MarshalJSON wrote.
func (h *Hist) UnmarshalJSON(b []byte) error {
	var e encoded
	if err := json.Unmarshal(b, &e); err != nil {
		return fmt.Errorf("histogram: %w", err)
	}
	if len(e.HDR) > maxEncoded {
		return fmt.Errorf("histogram: %d bytes encoded (max %d)", len(e.HDR), maxEncoded)
	}
	if e.Clamped < 0 {
		return errors.New("histogram: negative clamped count")
	}
	d, err := hdr.Decode([]byte(e.HDR))
	if err != nil {
		return fmt.Errorf("decode histogram: %w", err)
	}
	if d.HighestTrackableValue() > math.MaxInt64/2 {
		return fmt.Errorf("histogram: range up to %d is not one of ours", d.HighestTrackableValue())
	}
	h.h, h.clamped = d, e.Clamped
	return nil
}
