package fabric

import "testing"

type mr struct{ MR }

// An EchoLoop's buffers: the first Depth in the receive MR and posted,
// the next Depth in the send MR and free; a send completion frees only a
// buffer being sent; wrIDs beyond the loop's name its last buffer.
func TestEchoLoopBuffers(t *testing.T) {
	rm, sm := &mr{}, &mr{}
	l := NewEchoLoop(nil, nil, rm, 100, sm, 7, 64, 2)
	want := []struct {
		mr  MR
		off int
	}{{rm, 100}, {rm, 164}, {sm, 7}, {sm, 71}}
	for b, w := range want {
		if m, off := l.Buf(b); m != w.mr || off != w.off {
			t.Errorf("buffer %d at %v+%d, want %v+%d", b, m, off, w.mr, w.off)
		}
	}
	if got := []BufState{BufPosted, BufPosted, BufFree, BufFree}; len(l.Bufs) != 4 || l.Bufs[0] != got[0] || l.Bufs[1] != got[1] || l.Bufs[2] != got[2] || l.Bufs[3] != got[3] {
		t.Fatalf("new loop's buffers %v, want %v", l.Bufs, got)
	}
	if l.Index(1) != 1 || l.Index(3) != 3 || l.Index(99) != 3 {
		t.Errorf("wrIDs 1, 3, 99 name buffers %d, %d, %d", l.Index(1), l.Index(3), l.Index(99))
	}
	if f := l.Free(); f != 2 {
		t.Errorf("first free buffer %d, want 2", f)
	}
	l.Bufs[2], l.Bufs[3], l.Inflight = BufSending, BufSending, 2
	if f := l.Free(); f != -1 {
		t.Errorf("free buffer %d with all sending", f)
	}
	l.Sent(1) // buffer 0 is posted, not sending: nothing changes
	l.Sent(0) // no buffer
	l.Sent(9)
	if l.Inflight != 2 || l.Bufs[0] != BufPosted {
		t.Fatalf("stray send completions changed the loop: %d in flight, %v", l.Inflight, l.Bufs)
	}
	l.Sent(4) // buffer 3
	if l.Inflight != 1 || l.Bufs[3] != BufFree || l.Free() != 3 {
		t.Errorf("after buffer 3's send: %d in flight, %v", l.Inflight, l.Bufs)
	}
}
