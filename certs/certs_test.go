package certs

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
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

func TestSetKeyExchange(t *testing.T) {
	for _, tc := range []struct {
		kex     string
		want    []tls.CurveID
		wantErr bool
	}{
		{KexHybrid, nil, false},
		{"", nil, false},
		{KexX25519, []tls.CurveID{tls.X25519}, false},
		{KexP256, []tls.CurveID{tls.CurveP256}, false},
		{"rsa", nil, true},
	} {
		conf := &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP384}}
		err := SetKeyExchange(conf, tc.kex)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v", tc.kex, err)
			continue
		}
		if !tc.wantErr && !reflect.DeepEqual(conf.CurvePreferences, tc.want) {
			t.Errorf("%q: curves %v, want %v", tc.kex, conf.CurvePreferences, tc.want)
		}
	}
}

// The generated pairs are Ed25519, and a handshake restricted to a key
// exchange on both ends really negotiates it.
func TestEd25519AndX25519Handshake(t *testing.T) {
	for kex, want := range map[string]tls.CurveID{KexX25519: tls.X25519, KexP256: tls.CurveP256} {
		t.Run(kex, func(t *testing.T) { testKexHandshake(t, kex, want) })
	}
}

func testKexHandshake(t *testing.T, kex string, want tls.CurveID) {
	sp, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := SelfSignedClient()
	if err != nil {
		t.Fatal(err)
	}
	if d := Describe(sp, kex); d != "Ed25519, self-signed, TLS 1.3, key exchange "+kex {
		t.Errorf("Describe = %q", d)
	}
	sconf, err := sp.Server(cp.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	cconf, err := Client(sp.CertPEM, cp)
	if err != nil {
		t.Fatal(err)
	}
	SetKeyExchange(sconf, kex)
	SetKeyExchange(cconf, kex)
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- tls.Server(a, sconf).Handshake() }()
	cc := tls.Client(b, cconf)
	if err := cc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := cc.ConnectionState()
	if st.CurveID != want {
		t.Errorf("negotiated %v, want %v", st.CurveID, want)
	}
	if alg := st.PeerCertificates[0].PublicKeyAlgorithm; alg != x509.Ed25519 {
		t.Errorf("server key %v, want Ed25519", alg)
	}
}

// issue makes an Ed25519 certificate for dns valid from nb to na, signed
// by parent (self-signed if nil), as a Pair.
func issue(t *testing.T, cn string, dns []string, isCA bool, nb, na time.Time, parent *Pair) Pair {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		DNSNames: dns, NotBefore: nb, NotAfter: na, BasicConstraintsValid: true, IsCA: isCA,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	signer, issuer := any(key), tmpl
	if parent != nil {
		pc, err := tls.X509KeyPair(parent.CertPEM, parent.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		signer, issuer = pc.PrivateKey, pc.Leaf
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
}

// Pinned accepts exactly the pinned server certificate (while it is
// valid) without path validation, and verifies any other against the
// pinned certificates as Client does.
func TestPinned(t *testing.T) {
	srv, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	other, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := SelfSignedClient()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := issue(t, "ca", nil, true, now.Add(-time.Hour), now.Add(time.Hour), nil)
	signed := issue(t, "leaf", []string{ServerName}, false, now.Add(-time.Hour), now.Add(time.Hour), &ca)
	misnamed := issue(t, "leaf", []string{"elsewhere"}, false, now.Add(-time.Hour), now.Add(time.Hour), &ca)
	expired := issue(t, "old", []string{ServerName}, true, now.Add(-2*time.Hour), now.Add(-time.Hour), nil)
	for _, c := range []struct {
		name      string
		pin, cert Pair
		ok        bool
	}{
		{"the pinned server", srv, srv, true},
		{"another self-signed server", srv, other, false},
		{"a server the pinned CA signed", ca, signed, true},
		{"a server the pinned CA signed for another name", ca, misnamed, false},
		{"the pinned server, expired", expired, expired, false},
	} {
		sconf, err := c.cert.Server(cli.CertPEM)
		if err != nil {
			t.Fatal(err)
		}
		cconf, err := Pinned(c.pin.CertPEM, cli)
		if err != nil {
			t.Fatal(err)
		}
		_, ce := handshake(t, sconf, cconf)
		if (ce == nil) != c.ok {
			t.Errorf("%s: client error %v, want ok %v", c.name, ce, c.ok)
		}
		// Client, with path validation, decides the same.
		std, err := Client(c.pin.CertPEM, cli)
		if err != nil {
			t.Fatal(err)
		}
		if _, ce := handshake(t, sconf, std); (ce == nil) != c.ok {
			t.Errorf("%s: Client's error %v, want ok %v", c.name, ce, c.ok)
		}
	}
}
