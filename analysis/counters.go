package analysis

import "strings"

// What a device counter's rise means, for the names drivers use.
const (
	CounterRNR        = "receiver not ready"
	CounterLoss       = "loss or reordering"
	CounterCongestion = "congestion"
	CounterCacheMiss  = "QP context cache miss"
)

// counterMeanings maps known counter names (rxe's, mlx5's, the sim's)
// to what their rise means; names not here are recorded unchanged and
// given no meaning.
var counterMeanings = map[string]string{
	// rxe
	"rcvd_rnr_err":           CounterRNR,
	"send_rnr_err":           CounterRNR,
	"retry_rnr_exceeded_err": CounterRNR,
	"duplicate_request":      CounterLoss,
	"out_of_seq_request":     CounterLoss,
	"rcvd_seq_err":           CounterLoss,
	"retry_exceeded_err":     CounterLoss,
	"completer_retry_err":    CounterLoss,
	// mlx5
	"out_of_buffer":              CounterRNR,
	"rnr_nak_retry_err":          CounterRNR,
	"local_ack_timeout_err":      CounterLoss,
	"packet_seq_err":             CounterLoss,
	"out_of_sequence":            CounterLoss,
	"implied_nak_seq_err":        CounterLoss,
	"np_cnp_sent":                CounterCongestion,
	"rp_cnp_handled":             CounterCongestion,
	"rp_cnp_ignored":             CounterCongestion,
	"np_ecn_marked_roce_packets": CounterCongestion,
	// the sim's simulated QP context cache (--sim-qp-cache)
	"qp_cache_miss": CounterCacheMiss,
}

// CounterMeaning says what a rise of the named counter means ("" for a
// name not known); a port prefix ("port2/") is looked through.
func CounterMeaning(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return counterMeanings[name]
}
