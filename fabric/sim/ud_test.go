package sim

import (
	"context"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
)

// A datagram that finds no receive posted is dropped, not held as an RC
// SEND would be, and Options.UDDropEvery drops datagrams on purpose.
// Frames between two contexts travel one connection and are handled in
// order, so the arrival of a marker on another QP means the datagram
// before it was handled.
func TestUDDrops(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		post bool // post a receive for the datagram
	}{
		{"no receive posted", Options{}, false},
		{"dropped on purpose", Options{UDDropEvery: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			da, err := New(Options{}).Open(ctx, fabric.DeviceConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer da.Close()
			pb := New(tc.opts)
			db, err := pb.Open(ctx, fabric.DeviceConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			qp := func(d fabric.Device) (fabric.PD, fabric.CQ, fabric.QP) {
				pd, _ := d.AllocPD()
				c, _ := d.CreateCQ(8)
				q, err := pd.CreateQP(fabric.QPInitAttr{Type: fabric.QPTypeUD, SendCQ: c, RecvCQ: c, MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
				if err != nil {
					t.Fatal(err)
				}
				for _, err := range []error{q.ToInit(fabric.InitAttr{Port: 1, QKey: 5}), q.ToRTR(fabric.RTRAttr{}), q.ToRTS(fabric.RTSAttr{})} {
					if err != nil {
						t.Fatal(err)
					}
				}
				return pd, c, q
			}
			pa, ca, qa := qp(da)
			pdb, cb, qb := qp(db)
			pm, cm, qm := qp(db) // the marker's QP
			mm, _ := pm.RegMR(fabric.GRHLen+64, fabric.AccessLocalWrite)
			sm, _ := pa.RegMR(64, fabric.AccessLocalWrite)
			rm, _ := pdb.RegMR(2*(fabric.GRHLen+64), fabric.AccessLocalWrite)
			to, err := pa.CreateAH(fabric.AHAttr{DLID: db.Port().LID, DGID: db.Port().GID, GIDIndex: 1})
			if err != nil {
				t.Fatal(err)
			}
			if tc.post {
				if err := qb.PostRecv(1, rm, 0, fabric.GRHLen+64); err != nil {
					t.Fatal(err)
				}
			}
			if err := qa.PostSendUD(1, sm, 0, 64, to, qb.QPN(), 5); err != nil {
				t.Fatal(err)
			}
			if err := qm.PostRecv(2, mm, 0, fabric.GRHLen+64); err != nil {
				t.Fatal(err)
			}
			if tc.opts.UDDropEvery == 0 {
				if err := qa.PostSendUD(2, sm, 0, 64, to, qm.QPN(), 5); err != nil {
					t.Fatal(err)
				}
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if wc, err := fabric.Await(actx, cm); err != nil || wc.WRID != 2 {
					t.Fatalf("marker: %+v, %v", wc, err)
				}
			} else {
				// Every datagram is dropped: wait until the device saw it.
				eventually.True(t, 10*time.Second, "the datagram arrives", func() bool { return pb.udSeen.Load() > 0 })
			}
			var wc [2]fabric.WC
			if n, _ := cb.Poll(wc[:]); n != 0 {
				t.Fatalf("the datagram was delivered: %+v", wc[:n])
			}
			if n, _ := ca.Poll(wc[:]); n < 1 || wc[0].Status != fabric.WCSuccess {
				t.Fatalf("sender's completions %+v: a lost datagram is sent all the same", wc[:n])
			}
		})
	}
}
