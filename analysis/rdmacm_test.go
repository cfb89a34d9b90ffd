package analysis

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// rdma_cm clients are diagnosed from their CM events: a rejection names
// the server's own cap, and a timeout is not blamed on TCP's listen queue
// even when its counters rose meanwhile. A server command's listen
// queue is its own listen(), not rdmaprobe's --backlog.
func TestDiagnoseRDMACM(t *testing.T) {
	lim := result.Limits{NoFile: 1 << 20, Somaxconn: 4096, ListenOverflows: 10}
	over := result.Limits{NoFile: 1 << 20, Somaxconn: 4096, ListenOverflows: 135}

	rej := failedPoint(6, 5, result.OutcomeRejected, "", "reason 28 (consumer defined), private data 148 bytes")
	d := Diagnose(rej, lim, lim, 6)
	if d == nil || d.Limit != "server-rejected" || !strings.Contains(d.Summary, "rejected 1 connect requests (reason 28 (consumer defined)") ||
		!strings.Contains(d.Summary, "once it held 5") || !strings.Contains(d.Suggestion, "rdma_listen") {
		t.Errorf("rejected: %+v", d)
	}

	cmTimeout := failedPoint(500, 420, result.OutcomeTimeout, "", "no CM event ended the attempt within --timeout: connecting")
	for i := range cmTimeout.Records {
		cmTimeout.Records[i].PhasesUS = map[string]int64{result.PhaseResolveAddr: 10}
	}
	if d := Diagnose(cmTimeout, lim, over, 500); d == nil || d.Limit == "listen-backlog" {
		t.Errorf("rdma_cm timeouts with TCP overflows: %+v, want no listen-backlog", d)
	}

	tcp := failedPoint(500, 420, result.OutcomeTimeout, "", "deadline during tcp-connect: i/o timeout")
	tcp.Target = &result.TargetPoint{}
	if d := Diagnose(tcp, lim, over, 500); d == nil || d.Limit != "listen-backlog" ||
		!strings.Contains(d.Suggestion, "server command's own listen() backlog") || strings.Contains(d.Suggestion, "--backlog") {
		t.Errorf("server command's listen queue: %+v", d)
	}
}
