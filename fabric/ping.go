package fabric

import "time"

// PingLoop is a load generator's one client in a closed-loop echo at
// depth 1 as a provider runs it (Pinger): one message outstanding, sent
// from one buffer and echoed by the server into one of two receive
// buffers. It is the client's twin of EchoLoop: when the client owns
// its process's only polling loop (one client, busy-polled), the loop
// in Go costs a round trip more than the wait itself at small sizes
// (in the TCG guest 7-12 µs of a 20-30 µs round trip: the cgo return,
// the routing, the post's and the repost's cgo calls), and a provider
// that runs the loop in its own code takes that off.
//
// A message is payload.Fill(its sequence number, Size); it counts when
// its echo arrived in full and payload.Check passes it. The state is the
// caller's slot (its fields are both in and out): the loop carries it
// on exactly as the caller's own loop would, and leaves it at every
// return for the caller to carry on from.
type PingLoop struct {
	QP      QP
	CQ      CQ // takes QP's sends and receives
	MR      MR // the send buffer and both receive buffers
	SendOff int
	RecvOff [2]int
	Size    int
	// SendWRID is every message's wrID, RecvWRID receive buffer r's (a
	// receive with wrID 0 is in buffer 0: the one the connect left).
	SendWRID uint64
	RecvWRID [2]uint64
	// End: no message goes out from this time on; an echo counts if it
	// arrived before.
	End time.Time

	// Seq is the message outstanding (0: none), sent at Posted; Sent and
	// Echoed say whether its send completion and its echo came (an echo
	// may come before its send's completion). Next is the message
	// written into the send buffer already (0: none): a send's buffer is
	// free once the send completed, before the echo, so the loop writes
	// the next message while the server works on the echo. Last is the
	// last sequence number used.
	Seq          uint64
	Posted       time.Time
	Sent, Echoed bool
	Next, Last   uint64

	// Out, for each call: the latencies of the echoes it took (from the
	// message's post to the poll that found its echo, which is when the
	// next message went out), how many of those arrived before End, and
	// how many messages it posted.
	Lat     []time.Duration
	Counted int64
	Posts   int64
	// On PingWC, the completion left to the caller; on PingBadEcho, the
	// receive buffer (not posted again) whose echo failed its check.
	WC  WC
	Bad int
}

// PingStop is why a Pinger's call returned.
type PingStop int

const (
	// PingSlice: the slice passed (or Lat is full); call again.
	PingSlice PingStop = iota
	// PingIdle: nothing came for idle: the caller waits for its CQ's
	// event, and handles what comes itself.
	PingIdle
	// PingWC: a completion the loop does not handle (not a success,
	// another QP's, not the message outstanding, an echo of another
	// length or sequence): the caller handles it (WC), from the state
	// the loop left.
	PingWC
	// PingBadEcho: the echo in receive buffer Bad failed its check. The
	// next message went out before the check (Seq).
	PingBadEcho
	// PingDone: End has passed and nothing is outstanding.
	PingDone
	// PingPost: a post failed (the error says which); the message it was
	// to post is not outstanding.
	PingPost
)

// Pinger is a QP whose provider can run a PingLoop itself. PingSpin runs
// l until idle passes without a completion, slice passes, or one of the
// other PingStops; an error with any stop but PingPost is the CQ's (it
// can no longer be polled). The time it polled in vain is added to l.CQ's
// count when that is a SpinCounter. In the verbs provider the loop is C,
// like the server's echo (Echoer).
type Pinger interface {
	PingSpin(l *PingLoop, idle, slice time.Duration) (PingStop, error)
}
