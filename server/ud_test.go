package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// A ud server takes a datagram only from the QPN and GID a client's hello
// named: another QP that knows the Q_Key (it travels in every packet)
// is dropped and counted, and the client goes on being served; a
// payload that fails its check ends the client, as in the other modes.
func TestUDSenderChecked(t *testing.T) {
	h := newHarnessOpts(t, 4, harnessOpts{mode: server.ModeUD})
	const size = 256
	pd, err := h.cdev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := h.cdev.CreateCQ(32)
	if err != nil {
		t.Fatal(err)
	}
	port := h.cdev.Port()
	newQP := func() fabric.QP {
		q, err := pd.CreateQP(fabric.QPInitAttr{Type: fabric.QPTypeUD, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{q.ToInit(fabric.InitAttr{Port: port.Port, QKey: 0x55}), q.ToRTR(fabric.RTRAttr{}), q.ToRTS(fabric.RTSAttr{})} {
			if err != nil {
				t.Fatal(err)
			}
		}
		return q
	}
	client, intruder := newQP(), newQP()
	send, err := pd.RegMR(size, fabric.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	recv, err := pd.RegMR(2*(fabric.GRHLen+size), fabric.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range []fabric.QP{client, intruder} {
		if err := q.PostRecv(uint64(i), recv, i*(fabric.GRHLen+size), fabric.GRHLen+size); err != nil {
			t.Fatal(err)
		}
	}
	reply, tc := h.sendHello(exchange.Msg{Type: exchange.Hello, QPN: client.QPN(), PSN: 1, LID: port.LID,
		MTU: port.ActiveMTU, GID: port.GID, QKey: 0x55})
	defer tc.Close()
	if reply.Type != exchange.Accept || reply.QKey == 0 {
		t.Fatalf("hello: reply %+v, want an accept with a Q_Key", reply)
	}
	ah, err := pd.CreateAH(fabric.AHAttr{DLID: reply.LID, DGID: reply.GID, GIDIndex: port.GIDIndex, HopLimit: 64, Port: port.Port})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		client.Destroy()
		intruder.Destroy()
		ah.Destroy()
		send.Dereg()
		recv.Dereg()
		pd.Dealloc()
		cq.Destroy()
	}()
	await := func() fabric.WC {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		wc, err := fabric.Await(ctx, cq)
		if err != nil {
			t.Fatal(err)
		}
		return wc
	}
	post := func(q fabric.QP, seq uint64, bad bool) {
		t.Helper()
		payload.Fill(send.Buf(), seq, size)
		if bad {
			send.Buf()[size-1] ^= 0xff
		}
		if err := q.PostSendUD(seq, send, 0, size, ah, reply.QPN, reply.QKey); err != nil {
			t.Fatal(err)
		}
	}
	// echo waits for the echo of message seq to the client (skipping
	// send completions).
	echo := func(seq uint64) {
		t.Helper()
		for {
			wc := await()
			if wc.Opcode != fabric.WCRecv {
				continue
			}
			if wc.QPN != client.QPN() || wc.SrcQP != reply.QPN || wc.ByteLen != fabric.GRHLen+size {
				t.Fatalf("echo of message %d: %+v", seq, wc)
			}
			if s, err := payload.Check(recv.Buf()[fabric.GRHLen : fabric.GRHLen+size]); err != nil || s != seq {
				t.Fatalf("echo: message %d (%v), want %d", s, err, seq)
			}
			if err := client.PostRecv(0, recv, 0, fabric.GRHLen+size); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	post(client, 1, false)
	echo(1)
	post(intruder, 2, false)
	eventually.True(t, guard, "the intruder's datagram is counted", func() bool {
		for e := range h.srv.Stats().Errors {
			if strings.Contains(e, "unknown sender") {
				return true
			}
		}
		return false
	})
	// Served in order by one router: an echo to the intruder would
	// have come before this one.
	post(client, 3, false)
	echo(3)
	var wcs [8]fabric.WC
	n, _ := cq.Poll(wcs[:])
	for _, wc := range wcs[:n] {
		if wc.Opcode == fabric.WCRecv {
			t.Fatalf("a receive after the client's echo: %+v (the intruder was answered)", wc)
		}
	}
	if st := h.srv.Stats(); st.Released != 0 || st.PeakAHs != 1 {
		t.Fatalf("the client was not kept, or not counted as one AH: %+v", st)
	}
	post(client, 4, true)
	eventually.True(t, guard, "the client is released on its bad payload", func() bool {
		st := h.srv.Stats()
		return st.Released == 1 && st.Failures[result.OutcomeMessage] == 2
	})
}
