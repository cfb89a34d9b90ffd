package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
)

// pairs makes a run's server and client pairs.
func pairs(t *testing.T) certs.Pairs {
	t.Helper()
	p, err := certs.NewPairs()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPointIsCalibrated(t *testing.T) {
	r, err := NewLocal(Spec{Procs: 1, Threshold: 1, Timeout: 5 * time.Second, StartTimeout: 5 * time.Second,
		TLSKex: certs.KexX25519, CalibrationWindow: 20 * time.Millisecond},
		LocalOptions{Exe: fake(t, goodServer, goodClients), Certs: pairs(t)})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := r.RunPoint(context.Background(), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := pt.Calibration
	if c == nil {
		t.Fatal("point has no calibration")
	}
	if c.BeforeHS <= 0 || c.AfterHS <= 0 || c.Error != "" || c.WindowSec != 0.02 {
		t.Fatalf("calibration %+v: want both readings of a 20 ms window", *c)
	}
	if hs := c.HS(); hs != (c.BeforeHS+c.AfterHS)/2 {
		t.Errorf("HS() = %v, want the mean of %v and %v", hs, c.BeforeHS, c.AfterHS)
	}
	// Off means no calibration and no need for certificates.
	if pt, err := newRunner(t, fake(t, goodServer, goodClients), 1).RunPoint(context.Background(), 1, 0); err != nil || pt.Calibration != nil {
		t.Errorf("calibration off: point calibration %+v, err %v", pt.Calibration, err)
	}
}

func TestCalibrationNeedsValidCerts(t *testing.T) {
	bad := certs.Pairs{Server: certs.Pair{CertPEM: []byte("not a PEM"), KeyPEM: []byte("no key")}}
	_, err := NewLocal(Spec{}, LocalOptions{Exe: "x", Certs: bad})
	if err == nil || !strings.Contains(err.Error(), "calibration") {
		t.Fatalf("NewLocal with unusable certificates: %v, want a calibration error", err)
	}
}
