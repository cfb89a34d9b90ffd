package runner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
)

// pairFiles writes a server and a client pair and returns their paths.
func pairFiles(t *testing.T) (cert, key, ccert, ckey string) {
	t.Helper()
	dir := t.TempDir()
	srv, err := certs.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := certs.SelfSignedClient()
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "s.pem"), filepath.Join(dir, "s.key")
	ccert, ckey = filepath.Join(dir, "c.pem"), filepath.Join(dir, "c.key")
	if err := srv.WriteFilesAs(cert, key); err != nil {
		t.Fatal(err)
	}
	if err := cli.WriteFilesAs(ccert, ckey); err != nil {
		t.Fatal(err)
	}
	return cert, key, ccert, ckey
}

func TestPointIsCalibrated(t *testing.T) {
	cert, key, ccert, ckey := pairFiles(t)
	r, err := NewLocal(Config{Exe: fake(t, goodServer, goodClients), Procs: 1, Threshold: 1,
		Timeout: 5 * time.Second, StartTimeout: 5 * time.Second, CertFile: cert, KeyFile: key,
		ClientCertFile: ccert, ClientKeyFile: ckey, TLSKex: certs.KexX25519, CalibrationWindow: 20 * time.Millisecond})
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

func TestCalibrationNeedsReadableCerts(t *testing.T) {
	_, err := NewLocal(Config{Exe: "x", CertFile: "/nonexistent/c", KeyFile: "/nonexistent/k"})
	if err == nil || !strings.Contains(err.Error(), "calibration") {
		t.Fatalf("NewLocal with unreadable certificates: %v, want a calibration error", err)
	}
}
