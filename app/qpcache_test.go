package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --sim-qp-cache: the server's simulated device misses its QP context
// cache once per QP while the clients fit in it, and on nearly every
// message once they do not; the misses reach run.json as the device's
// own (simulated) counter, and the report says they are simulated. The
// counts are per QP and per message, so a 0.3 s phase shows them.
func TestSimQPCacheCounted(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "4,16", "--sim-qp-cache", "8",
		"--duration", "300ms", "--msg-size", "64", "--calibrate", "0", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	if len(r.Points) != 2 {
		t.Fatalf("%d points", len(r.Points))
	}
	misses := func(i int) uint64 {
		dc := r.Points[i].DeviceCounters
		if dc == nil || dc.Source != "sim" {
			t.Fatalf("point %d: device counters %+v", i, dc)
		}
		if _, ok := dc.After["send_rnr_err"]; !ok {
			t.Errorf("point %d: no RNR counter: %v", i, dc.After)
		}
		return dc.Rise()["qp_cache_miss"]
	}
	if m := misses(0); m != 4 {
		t.Errorf("4 clients in a cache of 8: %d misses, want one per server QP", m)
	}
	if m, msgs := misses(1), r.Points[1].Traffic.Messages; m < uint64(msgs) {
		t.Errorf("16 clients through a cache of 8: %d misses for %d messages, want at least one a message", m, msgs)
	}
	reports, _ := filepath.Glob(filepath.Join(root, "*", "report.md"))
	if len(reports) != 1 {
		t.Fatalf("reports %v", reports)
	}
	data, err := os.ReadFile(reports[0])
	if err != nil {
		t.Fatal(err)
	}
	if b := string(data); !strings.Contains(b, "The sim's simulated device counters") || !strings.Contains(b, "16 clients, trial 1: qp_cache_miss +") {
		t.Errorf("report's device counters:\n%s", b)
	}
}
