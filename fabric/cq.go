package fabric

import (
	"context"
	"fmt"
)

// Opcode of a work completion.
type Opcode int

const (
	WCSend Opcode = iota
	WCRecv
	WCRDMAWrite
	WCRDMARead
)

// String names the opcode as the fabric's errors do.
func (o Opcode) String() string {
	switch o {
	case WCSend:
		return "send"
	case WCRecv:
		return "recv"
	case WCRDMAWrite:
		return "write"
	case WCRDMARead:
		return "read"
	}
	return fmt.Sprintf("opcode %d", int(o))
}

// WCStatus mirrors enum ibv_wc_status (only the values we produce or test).
type WCStatus int

const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCFatalErr       WCStatus = 19
	WCRespTimeoutErr WCStatus = 20
	WCGeneralErr     WCStatus = 21
)

// Name returns the enum ibv_wc_status name without its IBV_WC_ prefix
// ("RETRY_EXC_ERR"): the key completion errors are counted under.
func (s WCStatus) Name() string {
	switch s {
	case WCSuccess:
		return "SUCCESS"
	case WCLocLenErr:
		return "LOC_LEN_ERR"
	case WCLocQPOpErr:
		return "LOC_QP_OP_ERR"
	case WCLocProtErr:
		return "LOC_PROT_ERR"
	case WCWRFlushErr:
		return "WR_FLUSH_ERR"
	case WCRemInvReqErr:
		return "REM_INV_REQ_ERR"
	case WCRemAccessErr:
		return "REM_ACCESS_ERR"
	case WCRemOpErr:
		return "REM_OP_ERR"
	case WCRetryExcErr:
		return "RETRY_EXC_ERR"
	case WCRNRRetryExcErr:
		return "RNR_RETRY_EXC_ERR"
	case WCFatalErr:
		return "FATAL_ERR"
	case WCRespTimeoutErr:
		return "RESP_TIMEOUT_ERR"
	case WCGeneralErr:
		return "GENERAL_ERR"
	}
	return fmt.Sprintf("STATUS_%d", int(s))
}

// String returns the name used by ibv_wc_status_str.
func (s WCStatus) String() string {
	switch s {
	case WCSuccess:
		return "success"
	case WCLocLenErr:
		return "local length error"
	case WCLocQPOpErr:
		return "local QP operation error"
	case WCLocProtErr:
		return "local protection error"
	case WCWRFlushErr:
		return "Work Request Flushed Error"
	case WCRemInvReqErr:
		return "remote invalid request error"
	case WCRemAccessErr:
		return "remote access error"
	case WCRemOpErr:
		return "remote operation error"
	case WCRetryExcErr:
		return "transport retry counter exceeded"
	case WCRNRRetryExcErr:
		return "RNR retry counter exceeded"
	case WCFatalErr:
		return "fatal error"
	case WCRespTimeoutErr:
		return "response timeout error"
	case WCGeneralErr:
		return "general error"
	}
	return fmt.Sprintf("wc status %d", int(s))
}

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID    uint64
	Status  WCStatus
	Opcode  Opcode
	ByteLen int
	QPN     uint32 // local QP the completion belongs to
	// SrcQP is the sender's QPN of a UD receive, GRH whether the
	// buffer's first GRHLen bytes hold its GRH (IBV_WC_GRH).
	SrcQP uint32
	GRH   bool
}

// CQ is a completion queue. Completions are reaped with Poll; a caller with
// nothing to poll arms the CQ and waits, as with ibv_req_notify_cq and a
// completion channel (see Await).
type CQ interface {
	// Poll fills wc with up to len(wc) completions and returns how many.
	Poll(wc []WC) (int, error)
	// Arm requests an event for the next completion (ibv_req_notify_cq).
	Arm() error
	// Wait blocks until an armed event fires or ctx ends.
	Wait(ctx context.Context) error
	Destroy() error
}
