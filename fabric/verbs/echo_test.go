//go:build verbs && cgo

package verbs

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/payload"
)

// TestEchoSpin: the echo loop in C echoes a message byte for byte from
// the buffer it landed in, of any length (the C check's tail included),
// with a free buffer posted in its place, and a loop's buffers rotate
// from one message to the next. Every receive that payload.Check would
// not pass (a flipped byte in the header, the filler or the tail) is
// echoed as it came and then handed back to the caller, its buffer
// marked as sending; a goodbye and a message shorter than the loop's
// size are handed back without an echo.
func TestEchoSpin(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// setup connects a pair: b echoes messages of size bytes.
	setup := func(t *testing.T, size int) (a, b *ep, loop *fabric.EchoLoop) {
		t.Helper()
		a, b = pair(t, dev, pd)
		if err := connect(a, b); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.PostRecv(0, b.rmr, 0, size); err != nil {
			t.Fatal(err)
		}
		return a, b, fabric.NewEchoLoop(b.rcq, b.scq, b.rmr, 0, b.smr, 0, size, 1)
	}
	// send posts msg from a and returns what b's loop did with it, and
	// the buffer it landed in.
	send := func(t *testing.T, a, b *ep, loop *fabric.EchoLoop, msg []byte) (fabric.WC, bool, int) {
		t.Helper()
		landed := -1
		for k, st := range loop.Bufs {
			if st == fabric.BufPosted {
				landed = k
			}
		}
		if err := a.qp.PostRecv(1, a.rmr, 0, msgSize); err != nil {
			t.Fatal(err)
		}
		copy(a.smr.Buf(), msg)
		if err := a.qp.PostSend(2, a.smr, 0, len(msg)); err != nil {
			t.Fatal(err)
		}
		if wc, err := fabric.Await(ctx, a.scq); err != nil || wc.Status != fabric.WCSuccess {
			t.Fatalf("send: %+v %v", wc, err)
		}
		// The message is in b's CQ by now.
		wc, got, err := b.qp.(fabric.Echoer).EchoSpin(loop, 50*time.Millisecond, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return wc, got, landed
	}
	// echoed wants msg back at a, and b's loop sending it from the buffer
	// it landed in with the other one posted.
	echoed := func(t *testing.T, a *ep, loop *fabric.EchoLoop, landed int, msg []byte) {
		t.Helper()
		wc, err := fabric.Await(ctx, a.rcq)
		if err != nil || wc.Status != fabric.WCSuccess || wc.ByteLen != len(msg) {
			t.Fatalf("%d bytes: echo %+v %v", len(msg), wc, err)
		}
		if !bytes.Equal(a.rmr.Buf()[:len(msg)], msg) {
			t.Fatalf("%d bytes: the echo differs from the message", len(msg))
		}
		if loop.Inflight != 1 || loop.Bufs[landed] != fabric.BufSending || loop.Bufs[1-landed] != fabric.BufPosted {
			t.Fatalf("after the echo from buffer %d: %d in flight, buffers %v", landed, loop.Inflight, loop.Bufs)
		}
	}
	for _, size := range []int{payload.HeaderLen, 13, 100, msgSize - 3, msgSize} {
		a, b, loop := setup(t, size)
		// Three messages: the second lands in buffer 1 (the send MR's)
		// and takes buffer 0 back from its finished send; the third lands
		// in buffer 0 again.
		for i, want := range []int{0, 1, 0} {
			msg := make([]byte, size)
			payload.Fill(msg, uint64(size+i), size)
			_, got, landed := send(t, a, b, loop, msg)
			if got {
				t.Fatalf("%d bytes: a message that checks was handed back", size)
			}
			if landed != want {
				t.Fatalf("%d bytes, message %d: landed in buffer %d, want %d", size, i, landed, want)
			}
			echoed(t, a, loop, landed, msg)
		}
	}
	// handedBack sends msg to a loop of size bytes and wants it back,
	// echoed (as it came) or not.
	handedBack := func(t *testing.T, size int, msg []byte, echo bool) {
		t.Helper()
		a, b, loop := setup(t, size)
		wc, got, landed := send(t, a, b, loop, msg)
		if !got || wc.Status != fabric.WCSuccess || wc.WRID != 0 || wc.ByteLen != len(msg) || wc.Opcode != fabric.WCRecv {
			t.Fatalf("handed back %v: %+v", got, wc)
		}
		if echo {
			echoed(t, a, loop, landed, msg)
			return
		}
		var wcs [1]fabric.WC
		if n, _ := a.rcq.Poll(wcs[:]); n != 0 {
			t.Fatalf("an echo came back: %+v", wcs[0])
		}
		if loop.Inflight != 0 || loop.Bufs[0] != fabric.BufPosted || loop.Bufs[1] != fabric.BufFree {
			t.Fatalf("not echoed, yet %d in flight, buffers %v", loop.Inflight, loop.Bufs)
		}
	}
	for _, size := range []int{msgSize, msgSize - 3} {
		for _, at := range []int{0, 9, payload.HeaderLen, 2000, size - 1} {
			msg := make([]byte, size)
			payload.Fill(msg, 7, size)
			msg[at] ^= 0x10
			if _, err := payload.Check(msg); err == nil {
				t.Fatalf("byte %d flipped still checks in Go", at)
			}
			t.Run("flipped", func(t *testing.T) { handedBack(t, size, msg, true) })
		}
	}
	bye := make([]byte, payload.HeaderLen)
	payload.Fill(bye, payload.Bye, len(bye))
	t.Run("goodbye", func(t *testing.T) { handedBack(t, len(bye), bye, false) })
	short := make([]byte, 100)
	payload.Fill(short, 3, len(short))
	t.Run("short", func(t *testing.T) { handedBack(t, 200, short, false) })

	// Nothing to receive: idle after about idle, nothing handed back,
	// and all of it counted as polling in vain on the receive CQ.
	_, b, loop := setup(t, msgSize)
	spun0 := b.rcq.(fabric.SpinCounter).Spun()
	start := time.Now()
	if _, got, err := b.qp.(fabric.Echoer).EchoSpin(loop, 20*time.Millisecond, time.Second); got || err != nil {
		t.Fatalf("idle loop: %v %v", got, err)
	}
	el := time.Since(start)
	if el < 20*time.Millisecond {
		t.Errorf("idle after %v, want 20ms", el)
	}
	if spun := b.rcq.(fabric.SpinCounter).Spun() - spun0; spun < 20*time.Millisecond || spun > el {
		t.Errorf("an idle loop of %v counted %v of polling in vain", el, spun)
	}
	// A loop its MRs cannot hold is refused, and so is one whose buffer
	// states do not match its depth.
	loop.Size = 2 * msgSize
	if _, _, err := b.qp.(fabric.Echoer).EchoSpin(loop, time.Millisecond, time.Millisecond); err == nil {
		t.Error("a loop larger than its MRs ran")
	}
	loop.Size, loop.Bufs = msgSize, loop.Bufs[:1]
	if _, _, err := b.qp.(fabric.Echoer).EchoSpin(loop, time.Millisecond, time.Millisecond); err == nil {
		t.Error("a loop with 1 buffer state for depth 1 ran")
	}
}

// TestSpinPoll: a CQ's SpinPoll returns as soon as a completion is there
// (its send, here), and with none after about the stretch it was given;
// SpinOne hands back what it found and gives up after busy. The CQ
// counts the time spent polling it in vain (fabric.SpinCounter): all of
// an empty stretch, next to none of one that finds a completion waiting,
// and most of SpinOne's wait on an empty CQ (not its yields).
func TestSpinPoll(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	a, b := pair(t, dev, pd)
	if err := connect(a, b); err != nil {
		t.Fatal(err)
	}
	sp := a.scq.(fabric.Spinner)
	sc := a.scq.(fabric.SpinCounter)
	wc := make([]fabric.WC, 4)
	s0, t0 := sc.Spun(), time.Now()
	if n, err := sp.SpinPoll(wc, 2*time.Millisecond); n != 0 || err != nil {
		t.Fatalf("empty CQ: %d completions, %v", n, err)
	}
	d := time.Since(t0)
	if d < 2*time.Millisecond {
		t.Errorf("empty CQ: returned after %v, before the 2ms stretch", d)
	}
	if s := sc.Spun() - s0; s < 2*time.Millisecond || s > d {
		t.Errorf("empty CQ: %v counted as spun in a %v call of a 2ms stretch", s, d)
	}
	if err := b.qp.PostRecv(0, b.rmr, 0, msgSize); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(7, a.smr, 0, msgSize); err != nil {
		t.Fatal(err)
	}
	// rxe completes a send inside its post: the spin finds it at once.
	s0, t0 = sc.Spun(), time.Now()
	n, err := sp.SpinPoll(wc, 10*time.Second)
	if err != nil || n != 1 || wc[0].WRID != 7 || wc[0].Status != fabric.WCSuccess {
		t.Fatalf("after a send: %d completions %+v, %v", n, wc[:n], err)
	}
	if s, d := sc.Spun()-s0, time.Since(t0); s > d || s > time.Second {
		t.Errorf("a completion waiting: %v counted as spun in a %v call", s, d)
	}
	ctx := context.Background()
	n, err = fabric.SpinOne(ctx, b.rcq, wc, 10*time.Second)
	if err != nil || n != 1 || wc[0].Opcode != fabric.WCRecv || wc[0].ByteLen != msgSize {
		t.Fatalf("SpinOne: %d completions %+v, %v", n, wc[:n], err)
	}
	bc := b.rcq.(fabric.SpinCounter)
	// Once before: in the TCG guest the first run of a code path costs
	// its translation, milliseconds spent outside the polls.
	if n, err := fabric.SpinOne(ctx, b.rcq, wc, 3*time.Millisecond); n != 0 || err != nil {
		t.Fatalf("SpinOne on an empty CQ: %d, %v", n, err)
	}
	s0, t0 = bc.Spun(), time.Now()
	if n, err := fabric.SpinOne(ctx, b.rcq, wc, 20*time.Millisecond); n != 0 || err != nil {
		t.Fatalf("SpinOne on an empty CQ: %d, %v", n, err)
	}
	d = time.Since(t0)
	if d < 20*time.Millisecond {
		t.Errorf("SpinOne gave up after %v, before busy", d)
	}
	// The stretches in C and the loop's work between them count, its
	// yields do not: most of the wait, with nothing else to run.
	if s := bc.Spun() - s0; s < d/4 || s > d {
		t.Errorf("SpinOne on an empty CQ: %v counted as spun in %v", s, d)
	}
}

// TestSpinAnswer: the answer goes out in the poll that finds its
// receive, once, stamped in Go's clock, and not for another receive or
// after its time.
func TestSpinAnswer(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	a, b := pair(t, dev, pd)
	if err := connect(a, b); err != nil {
		t.Fatal(err)
	}
	an := b.rcq.(fabric.Answerer)
	wc := make([]fabric.WC, 4)
	ans := &fabric.Answer{QP: b.qp, MR: b.smr, Len: msgSize, WRID: 9, Before: time.Now().Add(time.Minute)}
	// A receive of another length is not answered.
	for _, err := range []error{b.qp.PostRecv(1, b.rmr, 0, msgSize), a.qp.PostSend(1, a.smr, 0, msgSize/2)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := an.SpinAnswer(wc, 10*time.Second, ans); n != 1 || err != nil || ans.Index != -1 {
		t.Fatalf("a %d-byte receive: %d completions, %v, answered as %d", msgSize/2, n, err, ans.Index)
	}
	// Nor one after Before.
	ans.Before = time.Now()
	for _, err := range []error{b.qp.PostRecv(2, b.rmr, 0, msgSize), a.qp.PostSend(2, a.smr, 0, msgSize)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := an.SpinAnswer(wc, 10*time.Second, ans); n != 1 || err != nil || ans.Index != -1 {
		t.Fatalf("after Before: %d completions, %v, answered as %d", n, err, ans.Index)
	}
	// The one it waits for is.
	ans.Before = time.Now().Add(time.Minute)
	for _, err := range []error{b.qp.PostRecv(3, b.rmr, 0, msgSize), a.qp.PostRecv(4, a.rmr, 0, msgSize)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := a.qp.PostSend(3, a.smr, 0, msgSize); err != nil {
		t.Fatal(err)
	}
	// The send's completion follows its receipt at b (RC): from here on
	// the receive waits in b's CQ, and the answer is posted after t0.
	for sent := false; !sent; {
		n, err := fabric.SpinOne(context.Background(), a.scq, wc, 10*time.Second)
		if err != nil || n == 0 {
			t.Fatalf("awaiting the send's completion: %d, %v", n, err)
		}
		for _, w := range wc[:n] {
			sent = sent || w.WRID == 3
		}
	}
	t0 := time.Now()
	n, err := an.SpinAnswer(wc, 10*time.Second, ans)
	t1 := time.Now()
	if n != 1 || err != nil || ans.Index != 0 || ans.Err != nil || wc[0].WRID != 3 {
		t.Fatalf("the receive: %d completions %+v, %v, answered as %d (%v)", n, wc[:n], err, ans.Index, ans.Err)
	}
	if ans.At.Before(t0) || ans.At.After(t1) {
		t.Errorf("posted at %v, outside the call's [%v, %v]", ans.At, t0, t1)
	}
	n, err = fabric.SpinOne(context.Background(), a.rcq, wc, 10*time.Second)
	if n != 1 || err != nil || wc[0].WRID != 4 || wc[0].ByteLen != msgSize {
		t.Fatalf("the peer got %d completions %+v, %v; want the answer", n, wc[:n], err)
	}
	n, err = fabric.SpinOne(context.Background(), b.scq, wc, 10*time.Second)
	if n != 1 || err != nil || wc[0].WRID != 9 || wc[0].Status != fabric.WCSuccess {
		t.Fatalf("the answer's send completion: %d %+v, %v", n, wc[:n], err)
	}
	// An answer whose QP is gone leaves the CQ to poll as before.
	c, err := dev.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	gone, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Destroy(); err != nil {
		t.Fatal(err)
	}
	ans.QP = gone
	if n, err := an.SpinAnswer(wc, time.Millisecond, ans); n != 0 || err != nil || ans.Index != -1 {
		t.Errorf("an answer on a destroyed QP: %d completions, %v, answered as %d", n, err, ans.Index)
	}
}

// TestSpinAnswerSharedCQ: on a CQ that takes the answering QP's sends
// too (as a load generator's group CQ does), the answer's own completion
// comes back with the receive it answered, after it: rxe completes a send
// inside its post, and the call that posted it polls once more. Nothing
// is lost or returned twice when it is not there yet.
func TestSpinAnswerSharedCQ(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	a, b := pair(t, dev, pd)
	// b's QP sends and receives on one CQ.
	shared, err := dev.CreateCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: shared, RecvCQ: shared, MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		shared.Destroy()
		t.Fatal(err)
	}
	b.qp.Destroy()
	b.qp = qp
	t.Cleanup(func() {
		qp.Destroy()
		b.qp = nil
		shared.Destroy()
	})
	if err := connect(a, b); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	an := shared.(fabric.Answerer)
	wc := make([]fabric.WC, 4)
	together := 0
	for i := uint64(0); i < 5; i++ {
		for _, err := range []error{b.qp.PostRecv(100+i, b.rmr, 0, msgSize), a.qp.PostRecv(200+i, a.rmr, 0, msgSize),
			a.qp.PostSend(i, a.smr, 0, msgSize)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		// Once a's send completed, the receive waits in b's CQ.
		if w, err := fabric.Await(ctx, a.scq); err != nil || w.WRID != i || w.Status != fabric.WCSuccess {
			t.Fatalf("round %d: a's send %+v, %v", i, w, err)
		}
		ans := &fabric.Answer{QP: b.qp, MR: b.smr, Len: msgSize, WRID: 9, Before: time.Now().Add(time.Minute)}
		n, err := an.SpinAnswer(wc, 10*time.Second, ans)
		if err != nil || n < 1 || ans.Index != 0 || ans.Err != nil || wc[0].WRID != 100+i || wc[0].Opcode != fabric.WCRecv {
			t.Fatalf("round %d: %d completions %+v, %v, answered as %d (%v)", i, n, wc[:max(n, 0)], err, ans.Index, ans.Err)
		}
		switch {
		case n == 2 && wc[1].WRID == 9 && wc[1].Opcode == fabric.WCSend && wc[1].Status == fabric.WCSuccess:
			together++
		case n == 1:
			w, err := fabric.Await(ctx, shared)
			if err != nil || w.WRID != 9 || w.Opcode != fabric.WCSend {
				t.Fatalf("round %d: the answer's completion came as %+v, %v", i, w, err)
			}
		default:
			t.Fatalf("round %d: %d completions %+v", i, n, wc[:n])
		}
		if w, err := fabric.Await(ctx, a.rcq); err != nil || w.WRID != 200+i || w.ByteLen != msgSize {
			t.Fatalf("round %d: the answer reached a as %+v, %v", i, w, err)
		}
		var left [1]fabric.WC
		if n, _ := shared.Poll(left[:]); n != 0 {
			t.Fatalf("round %d: a completion left over: %+v", i, left[0])
		}
	}
	if together == 0 {
		t.Error("in 5 rounds the answer's completion never came with the receive")
	}
	t.Logf("the answer's completion came with the receive in %d of 5 rounds", together)
}
