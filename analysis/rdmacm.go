package analysis

import (
	"fmt"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// cmClients reports whether pt's clients were rdma_cm's: their
// connections never touch TCP, so the kernel's TCP listen-queue
// counters say nothing of them, and their failures are read from the
// CM events that ended them.
func cmClients(pt result.Point) bool {
	for _, r := range pt.Records {
		if _, ok := r.PhasesUS[result.PhaseResolveAddr]; ok {
			return true
		}
		switch r.Outcome {
		case result.OutcomeRejected, result.OutcomeUnreachable, result.OutcomeConnectError,
			result.OutcomeAddrError, result.OutcomeRouteError, result.OutcomeDisconnected:
			return true
		}
	}
	return false
}

// cmDiagnosis names what the CM events of rdma_cm clients say, when
// they say it plainly: the server rejected the requests above what it
// held, or its side never answered. It fills d and reports true then.
func cmDiagnosis(pt result.Point, f failure, d *result.Diagnosis) bool {
	if !cmClients(pt) {
		return false
	}
	switch f.class {
	case result.OutcomeRejected:
		d.Limit = "server-rejected"
		d.Summary = fmt.Sprintf("the server rejected %s connect requests (%s) once it held %s", Thousands(f.count), f.text, Thousands(pt.Connected))
		d.Suggestion = "the server's own cap: its connection table or its rdma_cm listen backlog (rdma_listen); see its configuration"
		if strings.Contains(f.text, "reason 8 ") {
			d.Suggestion = "no listener answered on the port: the server was not listening, or not on the device the route reached"
		}
		return true
	case result.OutcomeUnreachable:
		d.Limit = "cm-unreachable"
		d.Summary = fmt.Sprintf("%s connect requests went unanswered (UNREACHABLE), %s of %s connected", Thousands(f.count), Thousands(pt.Connected), Thousands(attempted(pt)))
		d.Suggestion = "the server's side dropped connect requests: its rdma_cm listen backlog (rdma_listen) or its CPU; pace with --connect-rate or --inflight"
		return true
	}
	return false
}

// backlogAdvice is what a listen queue's overflow asks of the server:
// rdmaprobe's own takes --backlog, a server command has its own listen().
func backlogAdvice(pt result.Point) string {
	if pt.Target != nil {
		return "raise the server command's own listen() backlog and net.core.somaxconn, or pace launches with --connect-rate"
	}
	return "raise the server's --backlog and net.core.somaxconn, or pace launches with --connect-rate"
}
