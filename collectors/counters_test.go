package collectors

import (
	"reflect"
	"testing"
)

func TestPortCountersRXE(t *testing.T) {
	m, err := PortCounters("testdata/sys", "rxe0")
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 15 {
		t.Errorf("read %d counters, want rxe's 15 (lifespan is a setting): %v", len(m), m)
	}
	if _, ok := m["lifespan"]; ok {
		t.Error("lifespan read as a counter")
	}
	for k, want := range map[string]uint64{"sent_pkts": 120345, "rcvd_pkts": 120301, "rcvd_rnr_err": 35, "completer_retry_err": 77} {
		if m[k] != want {
			t.Errorf("%s = %d, want %d", k, m[k], want)
		}
	}
}

func TestPortCountersMLX5(t *testing.T) {
	m, err := PortCounters("testdata/sys", "mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]uint64{"out_of_buffer": 12, "port2/out_of_buffer": 5, "port_rcv_packets": 1000, "np_cnp_sent": 3} {
		if v, ok := m[k]; !ok || v != want {
			t.Errorf("%s = %d (present %v), want %d", k, v, ok, want)
		}
	}
	if _, ok := m["symbol_error"]; ok {
		t.Error("an unreadable counter was kept")
	}
}

func TestPortCountersMissing(t *testing.T) {
	if _, err := PortCounters("testdata/sys", "nosuch0"); err == nil {
		t.Error("a device without ports read without error")
	}
}

func TestParseCounter(t *testing.T) {
	for in, want := range map[string]uint64{"0\n": 0, "18446744073709551615\n": 1<<64 - 1, " 42 ": 42} {
		if v, err := ParseCounter([]byte(in)); err != nil || v != want {
			t.Errorf("ParseCounter(%q) = %d, %v; want %d", in, v, err, want)
		}
	}
	for _, in := range []string{"", "N/A\n", "-1\n"} {
		if _, err := ParseCounter([]byte(in)); err == nil {
			t.Errorf("ParseCounter(%q) took it", in)
		}
	}
}

func TestCounterRates(t *testing.T) {
	before := map[string]uint64{"sent_pkts": 100, "rcvd_rnr_err": 4, "reset": 50}
	after := map[string]uint64{"sent_pkts": 300, "rcvd_rnr_err": 4, "reset": 2, "new": 9}
	got := CounterRates(before, after, 0.5)
	if want := map[string]float64{"sent_pkts": 400}; !reflect.DeepEqual(got, want) {
		t.Errorf("rates = %v, want %v (unchanged, reset and new counters left out)", got, want)
	}
	if CounterRates(nil, after, 1) != nil || CounterRates(before, after, 0) != nil {
		t.Error("rates without a reading before, or over no time")
	}
}
