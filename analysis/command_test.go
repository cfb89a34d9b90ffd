package analysis

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Client commands that could not be started are the harness's limit,
// never the server's; client commands that say the server was at
// capacity are the server's cap.
func TestDiagnoseCommandClients(t *testing.T) {
	start := result.ClientRecord{Outcome: result.OutcomeStart, Errno: "EAGAIN",
		Command: &result.CommandRecord{ExitCode: -1, HarnessLimit: true}}
	ok := result.ClientRecord{Outcome: result.OutcomeOK, Command: &result.CommandRecord{}}
	pt := result.Point{Clients: 4, Attempted: 4, Connected: 1,
		Outcomes: map[string]int{result.OutcomeStart: 3, result.OutcomeOK: 1},
		Records:  []result.ClientRecord{ok, start, start, start}}
	d := Diagnose(pt, result.Limits{}, result.Limits{}, 0)
	if d == nil || d.Limit != "harness" || !strings.Contains(d.Summary, "EAGAIN") || !strings.Contains(d.Summary, "not the server's") {
		t.Errorf("harness: %+v", d)
	}

	full := result.ClientRecord{Outcome: result.OutcomeExit, Error: "exit status 3: capclient: refused: server at capacity (MAX_CLIENTS=3)",
		Command: &result.CommandRecord{ExitCode: 3, Tail: "capclient: refused: server at capacity (MAX_CLIENTS=3)\n"}}
	pt = result.Point{Clients: 5, Attempted: 5, Connected: 3,
		Outcomes: map[string]int{result.OutcomeExit: 2, result.OutcomeOK: 3},
		Records:  []result.ClientRecord{ok, ok, ok, full, full}}
	if d := Diagnose(pt, result.Limits{}, result.Limits{}, 3); d == nil || d.Limit != "max-clients" {
		t.Errorf("at capacity: %+v", d)
	}
	// Exits that do not say so are not blamed on the cap.
	other := full
	other.Error = "exit status 1: segfault"
	other.Command = &result.CommandRecord{ExitCode: 1, Tail: "segfault\n"}
	pt.Records = []result.ClientRecord{ok, ok, ok, other, other}
	if d := Diagnose(pt, result.Limits{}, result.Limits{}, 3); d == nil || d.Limit == "max-clients" {
		t.Errorf("other exits: %+v", d)
	}

	// A server command that printed an errno while clients hung.
	hung := result.ClientRecord{Outcome: result.OutcomeTimeout, Command: &result.CommandRecord{ExitCode: -1}}
	pt = result.Point{Clients: 8, Attempted: 8, Connected: 7,
		Outcomes: map[string]int{result.OutcomeTimeout: 1, result.OutcomeOK: 7},
		Records:  []result.ClientRecord{ok, ok, ok, ok, ok, ok, ok, hung},
		Target:   &result.TargetPoint{Errors: []string{"rdma_create_qp: Invalid argument"}, Errnos: []string{"EINVAL"}}}
	if d := Diagnose(pt, result.Limits{}, result.Limits{}, 0); d == nil || d.Limit != "server-error" || !strings.Contains(d.Summary, "rdma_create_qp: Invalid argument (EINVAL)") {
		t.Errorf("server error: %+v", d)
	}
}
