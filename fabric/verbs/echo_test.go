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
	if _, got, err := b.qp.(fabric.Echoer).EchoSpin(loop, 20*time.Millisecond, time.Second); got || err != nil || !loop.Idle {
		t.Fatalf("idle loop: %v %v, idle %v", got, err, loop.Idle)
	}
	el := time.Since(start)
	if el < 20*time.Millisecond {
		t.Errorf("idle after %v, want 20ms", el)
	}
	if spun := b.rcq.(fabric.SpinCounter).Spun() - spun0; spun < 20*time.Millisecond || spun > el {
		t.Errorf("an idle loop of %v counted %v of polling in vain", el, spun)
	}
	// A slice that ends first returns as well, not idle: its caller
	// calls again rather than sleeping on the completion channel.
	start = time.Now()
	if _, got, err := b.qp.(fabric.Echoer).EchoSpin(loop, time.Second, 20*time.Millisecond); got || err != nil || loop.Idle {
		t.Fatalf("slice: %v %v, idle %v", got, err, loop.Idle)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("a 20ms slice of a 1s idle returned after %v", el)
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
