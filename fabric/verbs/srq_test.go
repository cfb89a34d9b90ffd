//go:build verbs && cgo

package verbs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/fabric"
)

func createSRQ(t testing.TB, pd fabric.PD, maxWR int) fabric.SRQ {
	t.Helper()
	s, err := pd.CreateSRQ(maxWR, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantErrno(t testing.TB, err error, verb string, errno syscall.Errno) {
	t.Helper()
	var ve *fabric.VerbError
	if !errors.As(err, &ve) || ve.Verb != verb || ve.Errno != errno {
		t.Fatalf("got %v, want %s: %s", err, verb, fabric.ErrnoName(errno))
	}
}

func isRXE(dev fabric.Device) bool { return strings.HasPrefix(dev.Name(), "rxe") }

// srqSide is the server half of TestSRQRoundTrips: QPs with no receive
// queue of their own, one CQ, one SRQ, one registered pool holding a send
// slot per client and the SRQ's buffers.
type srqSide struct {
	cq   fabric.CQ
	srq  fabric.SRQ
	pool fabric.MR
	qps  []fabric.QP
}

// TestSRQRoundTrips runs verified echoes between client endpoints (own
// CQs, MRs, RQ) and server QPs that share one SRQ and one CQ, as the
// server's srq mode does: the receive completion names the QP (WC.QPN)
// and the SRQ buffer (WC.WRID); the payload is checked there, copied to
// the client's send slot, the buffer reposted and the echo sent. With
// fewer buffers than clients, surplus SENDs are RNR-NAKed by rxe and
// retried (rnr_retry 7) until a buffer is reposted.
func TestSRQRoundTrips(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	for _, tt := range []struct {
		name             string
		clients, buffers int
		rounds           int
	}{
		{"one client", 1, 1, 5},
		{"buffer per client", 16, 16, 3},
		{"fewer buffers than clients", 16, 4, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const msg = 256
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sv := &srqSide{}
			var err error
			if sv.cq, err = dev.CreateCQ(4 * tt.clients); err != nil {
				t.Fatal(err)
			}
			sv.srq = createSRQ(t, pd, tt.buffers)
			if sv.pool, err = pd.RegMR(msg*(tt.clients+tt.buffers), fabric.AccessLocalWrite); err != nil {
				t.Fatal(err)
			}
			clients := make([]*ep, tt.clients)
			t.Cleanup(func() {
				var errs []error
				for _, q := range sv.qps {
					errs = append(errs, q.Destroy())
				}
				for _, c := range clients {
					if c != nil {
						errs = append(errs, c.close())
					}
				}
				errs = append(errs, sv.srq.Destroy(), sv.pool.Dereg(), sv.cq.Destroy())
				if err := errors.Join(errs...); err != nil {
					t.Errorf("teardown: %v", err)
				}
			})
			sendOff := func(i int) int { return msg * i }
			bufOff := func(k int) int { return msg * (tt.clients + k) }
			for k := range tt.buffers {
				if err := sv.srq.PostRecv(uint64(k), sv.pool, bufOff(k), msg); err != nil {
					t.Fatal(err)
				}
			}
			byQPN := map[uint32]int{}
			for i := range clients {
				if clients[i], err = newEP(dev, pd); err != nil {
					t.Fatal(err)
				}
				c := clients[i]
				c.psn = randPSN(t)
				q, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: sv.cq, RecvCQ: sv.cq, SRQ: sv.srq, MaxSendWR: 2, MaxSendSGE: 1})
				if err != nil {
					t.Fatal(err)
				}
				sv.qps = append(sv.qps, q)
				byQPN[q.QPN()] = i
				server := &ep{dev: dev, qp: q, psn: randPSN(t)}
				for _, x := range []*ep{c, server} {
					if err := x.qp.ToInit(initAttr()); err != nil {
						t.Fatal(err)
					}
				}
				for _, step := range []error{
					c.qp.ToRTR(rtrTo(c, server, server.psn)), server.qp.ToRTR(rtrTo(server, c, c.psn)),
					c.qp.ToRTS(rtsAttr(c.psn)), server.qp.ToRTS(rtsAttr(server.psn)),
				} {
					if step != nil {
						t.Fatal(step)
					}
				}
			}
			for round := range tt.rounds {
				for i, c := range clients {
					if err := c.qp.PostRecv(uint64(round), c.rmr, 0, msg); err != nil {
						t.Fatal(err)
					}
					copy(c.smr.Buf(), fmt.Sprintf("round %d client %d %x", round, i, c.psn))
					if err := c.qp.PostSend(uint64(round), c.smr, 0, msg); err != nil {
						t.Fatal(err)
					}
				}
				// Each echo's send completes within the round, as the
				// server awaits it before the client's next message.
				seen := make([]bool, tt.clients)
				for echoed, sent := 0, 0; echoed < tt.clients || sent < tt.clients; {
					wc, err := fabric.Await(ctx, sv.cq)
					if err != nil {
						t.Fatalf("round %d, %d echoed, %d sent: %v", round, echoed, sent, err)
					}
					if wc.Opcode == fabric.WCSend {
						if wc.Status != fabric.WCSuccess {
							t.Fatalf("echo send %+v", wc)
						}
						sent++
						continue
					}
					i, ok := byQPN[wc.QPN]
					if !ok || seen[i] || wc.Status != fabric.WCSuccess || wc.ByteLen != msg || wc.WRID >= uint64(tt.buffers) {
						t.Fatalf("round %d: receive completion %+v (client %d, known %v)", round, wc, i, ok)
					}
					seen[i] = true
					k := int(wc.WRID)
					got := sv.pool.Buf()[bufOff(k) : bufOff(k)+msg]
					if !bytes.Equal(got, clients[i].smr.Buf()[:msg]) {
						t.Fatalf("round %d: SRQ buffer %d holds %q for client %d", round, k, got[:24], i)
					}
					copy(sv.pool.Buf()[sendOff(i):], got)
					if err := sv.srq.PostRecv(uint64(k), sv.pool, bufOff(k), msg); err != nil {
						t.Fatal(err)
					}
					if err := sv.qps[i].PostSend(uint64(i), sv.pool, sendOff(i), msg); err != nil {
						t.Fatal(err)
					}
					echoed++
				}
				for i, c := range clients {
					wc, err := fabric.Await(ctx, c.rcq)
					if err != nil || wc.Status != fabric.WCSuccess || wc.Opcode != fabric.WCRecv || wc.ByteLen != msg ||
						!bytes.Equal(c.rmr.Buf()[:msg], c.smr.Buf()[:msg]) {
						t.Fatalf("round %d: client %d echo %+v %v differs", round, i, wc, err)
					}
					if wc, err := fabric.Await(ctx, c.scq); err != nil || wc.Status != fabric.WCSuccess {
						t.Fatalf("round %d: client %d send %+v %v", round, i, wc, err)
					}
				}
			}
			t.Logf("%d clients × %d rounds through an SRQ of %d buffers", tt.clients, tt.rounds, tt.buffers)
		})
	}
}

// A QP created with an SRQ has no receive queue: PostRecv fails with
// EINVAL, from the fabric and from librxe itself (its rq.queue is NULL).
func TestSRQQPHasNoRQ(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	cq, err := dev.CreateCQ(8)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	s := createSRQ(t, pd, 4)
	defer s.Destroy()
	m, err := pd.RegMR(msgSize, fabric.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dereg()
	// MaxRecvWR/SGE are ignored with an SRQ, whatever they say.
	q, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, SRQ: s, MaxSendWR: 2, MaxRecvWR: 1 << 30, MaxSendSGE: 1, MaxRecvSGE: 1000})
	if err != nil {
		t.Fatalf("QP on an SRQ with absurd receive caps: %v", err)
	}
	defer q.Destroy()
	for _, state := range []string{"RESET", "INIT"} {
		if state == "INIT" {
			if err := q.ToInit(initAttr()); err != nil {
				t.Fatal(err)
			}
		}
		wantErrno(t, q.PostRecv(1, m, 0, 64), "ibv_post_recv", syscall.EINVAL)
		raw := q.(*qp).postRaw("ibv_post_recv", 1, m, 0, 64, true)
		t.Logf("%s: provider's own ibv_post_recv on an SRQ QP: %v", state, raw)
		if isRXE(dev) {
			wantErrno(t, raw, "ibv_post_recv", syscall.EINVAL)
		}
	}
	if err := s.PostRecv(1, m, 0, 64); err != nil {
		t.Fatalf("the SRQ itself: %v", err)
	}
}

// The device's own checks on ibv_create_srq and ibv_post_srq_recv, with
// the errnos rxe returns (rxe_srq_chk_init: EINVAL; a full SRQ: ENOMEM).
// Exhausting max_srq (917,503 on 6.1) is not reachable: each SRQ maps its
// ring, so vm.max_map_count (65,530) ends it first with ENOMEM, which
// TestSRQMappings measures per object.
func TestSRQCaps(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	caps := dev.Caps()
	t.Logf("max_srq %d, max_srq_wr %d", caps.MaxSRQ, caps.MaxSRQWR)
	if caps.MaxSRQ <= 0 || caps.MaxSRQWR <= 0 {
		t.Fatalf("device reports no SRQ support: %+v", caps)
	}
	m, err := pd.RegMR(msgSize, fabric.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dereg()
	tests := []struct {
		name  string
		err   func() error
		verb  string
		errno syscall.Errno
	}{
		{"max_wr above max_srq_wr", func() error {
			s, err := pd.CreateSRQ(caps.MaxSRQWR+1, 1)
			if err == nil {
				s.Destroy()
			}
			return err
		}, "ibv_create_srq", syscall.EINVAL},
		{"max_wr 0", func() error {
			s, err := pd.CreateSRQ(0, 1)
			if err == nil {
				s.Destroy()
			}
			return err
		}, "ibv_create_srq", syscall.EINVAL},
		{"max_sge above max_srq_sge", func() error {
			s, err := pd.CreateSRQ(4, 1000)
			if err == nil {
				s.Destroy()
			}
			return err
		}, "ibv_create_srq", syscall.EINVAL},
		{"buffer outside the MR", func() error {
			s := createSRQ(t, pd, 4)
			defer s.Destroy()
			return s.PostRecv(1, m, msgSize-8, 16)
		}, "ibv_post_srq_recv", syscall.EINVAL},
		{"SRQ full", func() error {
			// Asked for 2, rxe maps 3 (a power of two, one slot kept
			// empty), as for QPs and CQs.
			s := createSRQ(t, pd, 2)
			defer s.Destroy()
			for i := range 3 {
				if err := s.PostRecv(uint64(i), m, 0, 64); err != nil {
					return fmt.Errorf("receive %d: %w", i, err)
				}
			}
			return s.PostRecv(3, m, 0, 64)
		}, "ibv_post_srq_recv", syscall.ENOMEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			t.Log(err)
			if !isRXE(dev) {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			wantErrno(t, err, tt.verb, tt.errno)
		})
	}
	if s, err := pd.CreateSRQ(caps.MaxSRQWR, 1); err != nil {
		t.Errorf("max_wr = max_srq_wr: %v", err)
	} else {
		s.Destroy()
	}
}

// Destroy order as the kernel enforces it: the SRQ is busy (EBUSY, and
// still usable) while a QP uses it, and the PD while the SRQ lives; QP,
// then SRQ, then PD. The kernel's resource count shows the SRQ.
func TestSRQDestroyOrder(t *testing.T) {
	dev := openDev(t, -1)
	base, err := collectors.DeviceResources(dev.Name())
	if err != nil {
		t.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	m, err := pd.RegMR(msgSize, fabric.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	s := createSRQ(t, pd, 4)
	q, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, SRQ: s, MaxSendWR: 2, MaxSendSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	now, err := collectors.DeviceResources(dev.Name())
	if err != nil {
		t.Fatal(err)
	}
	if d := collectors.Subtract(now, base); d["srq"] != 1 || d["qp"] != 1 || d["cq"] != 1 || d["mr"] != 1 || d["pd"] != 1 {
		t.Errorf("kernel counts grew by %v, want 1 each of srq, qp, cq, mr, pd", d)
	}
	wantErrno(t, s.Destroy(), "ibv_destroy_srq", syscall.EBUSY)
	if err := s.PostRecv(1, m, 0, 64); err != nil {
		t.Fatalf("SRQ unusable after the refused destroy: %v", err)
	}
	if err := q.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := m.Dereg(); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, pd.Dealloc(), "ibv_dealloc_pd", syscall.EBUSY)
	if err := s.Destroy(); err != nil {
		t.Fatalf("SRQ after its QP: %v", err)
	}
	wantErrno(t, s.Destroy(), "ibv_destroy_srq", syscall.EINVAL)
	_, err = pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, SRQ: s, MaxSendWR: 2, MaxSendSGE: 1})
	wantErrno(t, err, "ibv_create_qp", syscall.EINVAL)
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	end, err := collectors.DeviceResources(dev.Name())
	if err != nil {
		t.Fatal(err)
	}
	if d := collectors.Subtract(end, base); d["srq"] != 0 || d["qp"] != 0 || d["pd"] != 0 {
		t.Errorf("after teardown the kernel still counts %v over the baseline", d)
	}

	// Close destroys leftovers in that order too: QP before SRQ.
	dev2, err := New().Open(context.Background(), fabric.DeviceConfig{Name: os.Getenv("RDMAPROBE_DEVICE"), GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	pd2, err := dev2.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq2, err := dev2.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	s2 := createSRQ(t, pd2, 4)
	if _, err := pd2.CreateQP(fabric.QPInitAttr{SendCQ: cq2, RecvCQ: cq2, SRQ: s2, MaxSendWR: 2, MaxSendSGE: 1}); err != nil {
		t.Fatal(err)
	}
	if err := dev2.Close(); err != nil {
		t.Fatalf("close with an SRQ and its QP left: %v", err)
	}
}

// TestSRQMappings measures what the srq mode saves per client on rxe:
// each QP maps its send and receive rings into the process, a QP on an
// SRQ only its send ring (vm.max_map_count is what one server process
// met at ~16k clients with 4 mappings each).
func TestSRQMappings(t *testing.T) {
	dev := openDev(t, -1)
	if !isRXE(dev) {
		t.Skip("mapping counts are rxe's layout")
	}
	pd := allocPD(t, dev)
	cq, err := dev.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	s := createSRQ(t, pd, 64)
	defer s.Destroy()
	maps := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("\n"))
	}
	const n = 100
	for _, tt := range []struct {
		name string
		srq  fabric.SRQ
		want int // mappings per QP
	}{{"own RQ", nil, 2}, {"SRQ", s, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			before := maps()
			var qps []fabric.QP
			for range n {
				q, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, SRQ: tt.srq, MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1})
				if err != nil {
					t.Fatal(err)
				}
				qps = append(qps, q)
			}
			grew := maps() - before
			for _, q := range qps {
				if err := q.Destroy(); err != nil {
					t.Error(err)
				}
			}
			t.Logf("%d QPs (%s): +%d mappings (%.2f per QP)", n, tt.name, grew, float64(grew)/n)
			// The Go runtime may map a little of its own meanwhile.
			if grew < tt.want*n || grew > tt.want*n+n/10 {
				t.Errorf("%d QPs added %d mappings, want %d per QP", n, grew, tt.want)
			}
		})
	}
}
