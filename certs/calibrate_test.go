package certs

import (
	"context"
	"testing"
	"time"
)

func calibrationConfigs(t *testing.T) (srv, cli, other Pair) {
	t.Helper()
	var err error
	if srv, err = SelfSigned(); err != nil {
		t.Fatal(err)
	}
	if cli, err = SelfSignedClient(); err != nil {
		t.Fatal(err)
	}
	if other, err = SelfSignedClient(); err != nil {
		t.Fatal(err)
	}
	return srv, cli, other
}

func TestHandshakeRate(t *testing.T) {
	srv, cli, _ := calibrationConfigs(t)
	sconf, err := srv.Server(cli.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	// Tickets on: the calibration must still not wait for a reader of them.
	sconf.SessionTicketsDisabled = false
	cconf, err := Client(srv.CertPEM, cli)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rate, err := HandshakeRate(context.Background(), sconf, cconf, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if rate <= 0 || took < 50*time.Millisecond {
		t.Fatalf("rate %.1f/s after %v, want > 0 after at least the window", rate, took)
	}
	// At least 3 handshakes happened, so the rate is at most 3 per elapsed time... and at least that.
	if min := 3 / took.Seconds(); rate < min*0.99 {
		t.Fatalf("rate %.1f/s below the 3 handshakes the window requires (%.1f/s)", rate, min)
	}
	if sconf.SessionTicketsDisabled {
		t.Fatal("HandshakeRate changed the caller's configuration")
	}
}

func TestHandshakeRateFails(t *testing.T) {
	srv, cli, other := calibrationConfigs(t)
	sconf, err := srv.Server(cli.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	// A client the server does not authorise: an error, not a hang.
	bad, err := Client(srv.CertPEM, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := HandshakeRate(context.Background(), sconf, bad, time.Millisecond); err == nil {
		t.Fatal("calibration with an unauthorised client certificate succeeded")
	}
	good, err := Client(srv.CertPEM, cli)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := HandshakeRate(ctx, sconf, good, time.Second); err == nil {
		t.Fatal("calibration under a cancelled context succeeded")
	}
	if _, err := HandshakeRate(context.Background(), nil, good, time.Second); err == nil {
		t.Fatal("calibration without a server configuration succeeded")
	}
}
