//go:build verbs && cgo

package verbs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

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

// The provider's own ibv_post_recv on a QP created with an SRQ: the
// fabric refuses it before librxe sees it (the suite checks that), and
// librxe, asked directly, answers EINVAL too (its rq.queue is NULL).
func TestSRQProviderPostRecv(t *testing.T) {
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
	q, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, SRQ: s, MaxSendWR: 2, MaxSendSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	for _, state := range []string{"RESET", "INIT"} {
		if state == "INIT" {
			if err := q.ToInit(initAttr()); err != nil {
				t.Fatal(err)
			}
		}
		raw := q.(*qp).postRaw("ibv_post_recv", 1, m, 0, 64, true)
		t.Logf("%s: provider's own ibv_post_recv on an SRQ QP: %v", state, raw)
		if isRXE(dev) {
			wantErrno(t, raw, "ibv_post_recv", syscall.EINVAL)
		}
	}
}

// The kernel counts an SRQ like any other object, and releases it with
// its QP, PD and the rest when they are destroyed; Close destroys
// leftovers in the order verbs needs too: QP before SRQ.
func TestSRQKernelCounts(t *testing.T) {
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
	for _, err := range []error{q.Destroy(), m.Dereg(), s.Destroy(), cq.Destroy(), pd.Dealloc()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	end, err := collectors.DeviceResources(dev.Name())
	if err != nil {
		t.Fatal(err)
	}
	if d := collectors.Subtract(end, base); d["srq"] != 0 || d["qp"] != 0 || d["pd"] != 0 {
		t.Errorf("after teardown the kernel still counts %v over the baseline", d)
	}

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
