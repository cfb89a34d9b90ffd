package fabric

import "time"

// EchoLoop is one client's echo as the server's per-client echo loop runs
// it, over 2·Depth buffers of Size bytes: buffer b < Depth is
// RecvMR[RecvOff+b·Size:][:Size], buffer b ≥ Depth is
// SendMR[SendOff+(b−Depth)·Size:][:Size]. A message is echoed from the
// buffer it landed in, so the buffers rotate: Depth are posted as
// receives (a receive's wrID is its buffer b), up to Depth are being sent
// (a send's wrID is b+1), the rest are free. Bufs holds each one's state
// and Inflight counts those being sent; an Echoer updates them as the
// loop in Go would.
type EchoLoop struct {
	RecvCQ, SendCQ   CQ
	RecvMR, SendMR   MR
	RecvOff, SendOff int
	Size, Depth      int
	Bufs             []BufState
	Inflight         int
	// Idle is set by Echoer.EchoSpin when it returned because idle
	// passed without a message, and cleared when it returned for any
	// other reason (its slice ended, a completion for the caller): only
	// an idle loop's caller arms the CQ and sleeps.
	Idle bool
}

// BufState is the state of one of an EchoLoop's buffers.
type BufState uint8

// The states of an EchoLoop's buffer.
const (
	BufFree    BufState = iota
	BufPosted           // posted as a receive
	BufSending          // an echo is being sent from it
)

// NewEchoLoop returns the loop of a client whose receives were posted in
// buffers 0..depth-1 (wrIDs 0..depth-1), nothing sent yet.
func NewEchoLoop(recvCQ, sendCQ CQ, recvMR MR, recvOff int, sendMR MR, sendOff, size, depth int) *EchoLoop {
	l := &EchoLoop{RecvCQ: recvCQ, SendCQ: sendCQ, RecvMR: recvMR, SendMR: sendMR,
		RecvOff: recvOff, SendOff: sendOff, Size: size, Depth: depth, Bufs: make([]BufState, 2*depth)}
	for b := 0; b < depth; b++ {
		l.Bufs[b] = BufPosted
	}
	return l
}

// Buf returns buffer b's MR and offset.
func (l *EchoLoop) Buf(b int) (MR, int) {
	if b < l.Depth {
		return l.RecvMR, l.RecvOff + b*l.Size
	}
	return l.SendMR, l.SendOff + (b-l.Depth)*l.Size
}

// Index is the buffer a receive's wrID names (clamped to the loop's).
func (l *EchoLoop) Index(recvWRID uint64) int {
	return int(min(recvWRID, uint64(2*l.Depth-1)))
}

// Free returns a free buffer, or -1 if all Depth that are not posted are
// being sent.
func (l *EchoLoop) Free() int {
	for b, st := range l.Bufs {
		if st == BufFree {
			return b
		}
	}
	return -1
}

// Sent records the send completion of wrID (b+1): its buffer is free.
func (l *EchoLoop) Sent(wrID uint64) {
	if b := int(wrID) - 1; b >= 0 && b < len(l.Bufs) && l.Bufs[b] == BufSending {
		l.Bufs[b] = BufFree
		l.Inflight--
	}
}

// Echoer is a QP whose provider can run the server's busy-polled echo
// itself, without a return to Go per message: take a receive in buffer
// b, post a free buffer as a receive in its place (awaiting a send while
// all Depth are in flight), send the echo from b, and verify b's payload
// (payload.Check) while it goes out: the check is off the round trip (in
// the TCG guest it and the copy to a send buffer it replaces were 4.5 µs
// of a 60 µs round trip). A message that fails its check has been echoed
// as it came (the client's own check then fails it too) and is handed
// back, its buffer BufSending.
//
// EchoSpin echoes on the Echoer's QP until idle passes without a
// message (l.Idle set), or slice passes (l.Idle clear: messages are
// still coming, and the caller calls again without sleeping), and
// returns ok = false; or returns ok = true
// and a receive completion for the caller: echoed and failing its check
// (its buffer BufSending), or not echoed (any other state: not a success,
// a goodbye, a length other than Size, or the slice ended while it waited
// for a free buffer), which the caller handles itself. A receive
// completion is never dropped. In the verbs provider this loop is C: one
// cgo call per stretch of messages instead of one per verb, which in the
// TCG guest was a quarter of a 1-client round trip. The time it polled
// for messages in vain is added to the receive CQ's count when that is a
// SpinCounter.
type Echoer interface {
	EchoSpin(l *EchoLoop, idle, slice time.Duration) (wc WC, ok bool, err error)
}
