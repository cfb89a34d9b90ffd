package certs

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// handshake runs both sides over loopback TCP and returns the server's
// handshake error and the client's error on its first read (in TLS 1.3 a
// rejected client certificate reaches the client only then).
func handshake(t *testing.T, sconf, cconf *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		a, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		s := tls.Server(a, sconf)
		err = s.Handshake()
		if err == nil {
			_, err = s.Write([]byte("k"))
		}
		done <- err
		s.Close()
	}()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(b, cconf)
	defer c.Close()
	clientErr = c.Handshake()
	if clientErr == nil {
		_, clientErr = c.Read(make([]byte, 1))
	}
	return <-done, clientErr
}

func TestMutualTLS(t *testing.T) {
	srv, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := SelfSignedClient()
	if err != nil {
		t.Fatal(err)
	}
	other, err := SelfSignedClient()
	if err != nil {
		t.Fatal(err)
	}
	sconf, err := srv.Server(cli.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if sconf.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("client auth %v", sconf.ClientAuth)
	}
	client := func(p ...Pair) *tls.Config {
		c, err := Client(srv.CertPEM, p...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if se, ce := handshake(t, sconf, client(cli)); se != nil || ce != nil {
		t.Errorf("authorised client: server %v, client %v", se, ce)
	}
	for name, cc := range map[string]*tls.Config{
		"no client certificate":                    client(),
		"unknown client certificate":               client(other),
		"server certificate as client certificate": client(srv),
	} {
		se, ce := handshake(t, sconf, cc)
		var oe *net.OpError
		if se == nil || !errors.As(ce, &oe) || oe.Op != "remote error" {
			t.Errorf("%s: server %v, client %v; want both to fail, the client on the server's alert", name, se, ce)
		}
	}
	if _, err := srv.Server([]byte("not PEM")); err == nil {
		t.Error("server accepted a client CA without certificates")
	}
}

func TestWriteFilesAs(t *testing.T) {
	p, err := SelfSignedClient()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := os.WriteFile(key, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteFilesAs(cert, key); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(key)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", fi.Mode().Perm())
	}
	q, err := Load(cert, key)
	if err != nil || string(q.CertPEM) != string(p.CertPEM) || string(q.KeyPEM) != string(p.KeyPEM) {
		t.Errorf("load back: %v", err)
	}
}
