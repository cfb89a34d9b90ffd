package analysis

import "testing"

func TestCounterMeaning(t *testing.T) {
	for name, want := range map[string]string{
		"rcvd_rnr_err": CounterRNR, "send_rnr_err": CounterRNR, "out_of_buffer": CounterRNR,
		"rcvd_seq_err": CounterLoss, "port2/packet_seq_err": CounterLoss,
		"np_cnp_sent": CounterCongestion, "qp_cache_miss": CounterCacheMiss,
		"sent_pkts": "", "some_new_counter": "",
	} {
		if got := CounterMeaning(name); got != want {
			t.Errorf("CounterMeaning(%q) = %q, want %q", name, got, want)
		}
	}
}
