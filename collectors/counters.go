package collectors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// PortCounters reads the counters of device's ports from a sysfs tree
// (root "/sys" in use, a fixture tree in tests): every file of
// ports/P/hw_counters (the driver's own: rxe's rcvd_rnr_err, mlx5's
// out_of_buffer) and ports/P/counters (the IB port counters of devices
// that answer PMA queries), under the device's own names. A port other
// than 1 prefixes its names with "portP/". Files that do not read as a
// number are left out: hw_counters' lifespan is a setting, and rxe's
// counters/ files fail to read (it answers no PMA queries).
func PortCounters(root, device string) (map[string]uint64, error) {
	ports, err := filepath.Glob(filepath.Join(root, "class", "infiniband", device, "ports", "*"))
	if err != nil || len(ports) == 0 {
		return nil, fmt.Errorf("no ports of %s under %s", device, filepath.Join(root, "class", "infiniband"))
	}
	out := map[string]uint64{}
	for _, dir := range ports {
		prefix := ""
		if p := filepath.Base(dir); p != "1" {
			prefix = "port" + p + "/"
		}
		for _, sub := range []string{"hw_counters", "counters"} {
			files, err := os.ReadDir(filepath.Join(dir, sub))
			if err != nil {
				continue
			}
			for _, f := range files {
				if f.IsDir() || f.Name() == "lifespan" {
					continue
				}
				data, err := os.ReadFile(filepath.Join(dir, sub, f.Name()))
				if err != nil {
					continue
				}
				if v, err := ParseCounter(data); err == nil {
					out[prefix+f.Name()] = v
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no readable port counters (hw_counters, counters) for " + device)
	}
	return out, nil
}

// ParseCounter reads one sysfs counter file: a decimal number and a
// newline.
func ParseCounter(data []byte) (uint64, error) {
	return strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
}

// CounterRates are the per-second rises from before to after, dt
// seconds apart, of the counters that rose; a counter that fell (the
// driver reset it) is left out.
func CounterRates(before, after map[string]uint64, dt float64) map[string]float64 {
	if dt <= 0 || before == nil {
		return nil
	}
	var out map[string]float64
	for k, a := range after {
		if b, ok := before[k]; ok && a > b {
			if out == nil {
				out = map[string]float64{}
			}
			out[k] = roundTo(float64(a-b)/dt, 1)
		}
	}
	return out
}

// sysRoot is where sysfs is mounted.
const sysRoot = "/sys"

// counterCollector reads the device port's counters: once when the
// session starts (Before), at every sample (their per-second rates since
// the last reading go in the sample), and when it stops (After).
type counterCollector struct {
	device string
	before map[string]uint64
	last   map[string]uint64
	lastAt time.Time
}

func newCounterCollector(device string) (*counterCollector, error) {
	c := &counterCollector{device: device}
	m, err := PortCounters(sysRoot, device)
	c.before, c.last, c.lastAt = m, m, time.Now()
	return c, err
}

func (*counterCollector) Name() string { return "device-counters" }

func (c *counterCollector) Collect(s *result.Sample) error {
	m, err := PortCounters(sysRoot, c.device)
	if err != nil {
		return err
	}
	now := time.Now()
	s.Counters = CounterRates(c.last, m, now.Sub(c.lastAt).Seconds())
	if c.before == nil {
		c.before = m
	}
	c.last, c.lastAt = m, now
	return nil
}

// result reads the counters a last time: the point's before and after.
func (c *counterCollector) result() *result.DeviceCounters {
	after, err := PortCounters(sysRoot, c.device)
	if err != nil {
		after = c.last
	}
	if c.before == nil || after == nil {
		return nil
	}
	return &result.DeviceCounters{Device: c.device, Source: "sysfs", Before: c.before, After: after}
}
