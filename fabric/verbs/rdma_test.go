//go:build verbs && cgo

package verbs

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// TestWriteRead: an RDMA WRITE lands in the peer's region by the time it
// completes, a READ brings it back, and a bad rkey or a region without
// the access completes with IBV_WC_REM_ACCESS_ERR, as the sim emulates.
func TestWriteRead(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	const rw = fabric.AccessLocalWrite | fabric.AccessRemoteWrite | fabric.AccessRemoteRead
	setup := func(t *testing.T, regAccess fabric.Access) (a *ep, region fabric.MR) {
		a, b := pair(t, dev, pd)
		for _, x := range []*ep{a, b} {
			if err := x.qp.ToInit(fabric.InitAttr{Access: rw}); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.qp.ToRTR(rtrTo(a, b, b.psn)); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.ToRTR(rtrTo(b, a, a.psn)); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.ToRTS(rtsAttr(a.psn)); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.ToRTS(rtsAttr(b.psn)); err != nil {
			t.Fatal(err)
		}
		region, err := pd.RegMR(msgSize, regAccess)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { region.Dereg() })
		return a, region
	}
	await := func(t *testing.T, a *ep) fabric.WC {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		wc, err := fabric.Await(ctx, a.scq)
		if err != nil {
			t.Fatal(err)
		}
		return wc
	}

	t.Run("write then read", func(t *testing.T) {
		a, region := setup(t, rw)
		if region.RKey() == 0 || region.Addr() == 0 {
			t.Fatalf("region rkey %#x addr %#x", region.RKey(), region.Addr())
		}
		for i := range a.smr.Buf()[:256] {
			a.smr.Buf()[i] = byte(i*13 + 5)
		}
		if err := a.qp.PostWrite(1, a.smr, 0, 256, region.Addr()+512, region.RKey()); err != nil {
			t.Fatal(err)
		}
		if wc := await(t, a); wc.Status != fabric.WCSuccess || wc.Opcode != fabric.WCRDMAWrite || wc.WRID != 1 {
			t.Fatalf("write completion %+v (%s)", wc, wc.Status)
		}
		if !bytes.Equal(region.Buf()[512:768], a.smr.Buf()[:256]) {
			t.Fatal("the write completed before its data was in the region")
		}
		if err := a.qp.PostRead(2, a.rmr, 0, 256, region.Addr()+512, region.RKey()); err != nil {
			t.Fatal(err)
		}
		if wc := await(t, a); wc.Status != fabric.WCSuccess || wc.Opcode != fabric.WCRDMARead || wc.WRID != 2 || wc.ByteLen != 256 {
			t.Fatalf("read completion %+v (%s)", wc, wc.Status)
		}
		if !bytes.Equal(a.rmr.Buf()[:256], a.smr.Buf()[:256]) {
			t.Fatal("the read did not bring the region's bytes")
		}
	})
	for _, tc := range []struct {
		name      string
		regAccess fabric.Access
		badKey    bool
		read      bool
	}{
		{"bad rkey", rw, true, false},
		{"write to a read-only region", fabric.AccessLocalWrite | fabric.AccessRemoteRead, false, false},
		{"read of a write-only region", fabric.AccessLocalWrite | fabric.AccessRemoteWrite, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, region := setup(t, tc.regAccess)
			key := region.RKey()
			if tc.badKey {
				key ^= 0x5500
			}
			var err error
			if tc.read {
				err = a.qp.PostRead(3, a.rmr, 0, 64, region.Addr(), key)
			} else {
				err = a.qp.PostWrite(3, a.smr, 0, 64, region.Addr(), key)
			}
			if err != nil {
				t.Fatal(err)
			}
			if wc := await(t, a); wc.Status != fabric.WCRemAccessErr {
				t.Fatalf("completion %+v (%s), want REM_ACCESS_ERR", wc, wc.Status)
			}
		})
	}
}
