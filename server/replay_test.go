package server_test

import (
	"context"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// A hello is a claim on an endpoint (QPN, PSN, GID, LID) for as long as
// its client is connected: the same hello again meanwhile is refused as
// replayed and creates no QP.
func TestReplayedHelloRefused(t *testing.T) {
	h := newHarness(t, 4)
	m := hello(0x4242, 0x777)

	reply, first := h.sendHello(m)
	if reply.Type != exchange.Accept {
		t.Fatalf("first hello: reply %+v, want accept", reply)
	}
	inUse := h.inUse()

	reply, again := h.sendHello(m)
	if reply.Type != exchange.Refuse || reply.Reason != exchange.ReasonReplayed {
		t.Fatalf("replayed hello: reply %+v, want refuse %q", reply, exchange.ReasonReplayed)
	}
	if _, err := awaitClose(again); err != nil {
		t.Error(err)
	}
	again.Close()
	if got := h.inUse(); got["qp"] != inUse["qp"] {
		t.Errorf("replay changed the server's QPs: %v, was %v", got, inUse)
	}

	// Once the original has left, its endpoint is free again: the server
	// remembers the hellos of connected clients only, so its memory does
	// not grow with the clients it served.
	first.Close()
	eventually.True(t, guard, "the first client is released", func() bool { return h.srv.Stats().Released == 1 })
	reply, late := h.sendHello(m)
	late.Close()
	if reply.Type != exchange.Accept {
		t.Errorf("the hello of a client that left, sent again: reply %+v, want accept", reply)
	}

	// Another PSN on the same QPN is a new endpoint.
	reply, other := h.sendHello(hello(0x4242, 0x778))
	if reply.Type != exchange.Accept {
		t.Errorf("fresh hello: reply %+v, want accept", reply)
	}
	other.Close()

	// Legitimate clients are unaffected.
	c := h.connectOK(context.Background(), 1)
	c.Close()

	eventually.True(t, guard, "every client is released", func() bool {
		st := h.srv.Stats()
		return st.Released == st.Connected && h.inUseIsBaseline()
	})
	st := h.srv.Stats()
	if st.Failures[result.OutcomeExchange] != 1 || st.Errors[exchange.ReasonReplayed] != 1 {
		t.Errorf("stats %+v: want 1 exchange failure, a replay", st)
	}
	if st.Connected != 4 {
		t.Errorf("connected %d, want 4", st.Connected)
	}
}
