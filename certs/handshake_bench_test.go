package certs

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSignedWith makes a self-signed pair with the given key type.
func selfSignedWith(tb testing.TB, kind string) tls.Certificate {
	var pub, priv any
	switch kind {
	case "ed25519":
		p, k, _ := ed25519.GenerateKey(rand.Reader)
		pub, priv = p, k
	default:
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		pub, priv = &k.PublicKey, k
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: ServerName},
		DNSNames: []string{ServerName}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}
}

// BenchmarkHandshake: one TLS 1.3 handshake over loopback, both ends in
// this process, by key type (ECDSA P-256 or Ed25519), key exchange
// (hybrid X25519MLKEM768, X25519, P-256) and mutual authentication. The
// figures behind the package's choices; run it inside the Soft-RoCE guest
// too (go test -c, then the binary in the guest), where they matter most:
// on 2026-11-23, 40 serial handshakes each, in ms per handshake:
//
//	                    host   TCG guest
//	p256/hybrid/mutual  1.13   12.6
//	ed25519/x25519/mut  0.80    8.0
func BenchmarkHandshake(b *testing.B) {
	for _, kind := range []string{"p256", "ed25519"} {
		for _, group := range KeyExchanges {
			for _, mutual := range []bool{false, true} {
				name := kind + "/" + group
				if mutual {
					name += "/mutual"
				}
				b.Run(name, func(b *testing.B) {
					sc, cc := selfSignedWith(b, kind), selfSignedWith(b, kind)
					pool := x509.NewCertPool()
					pool.AddCert(sc.Leaf)
					cpool := x509.NewCertPool()
					cpool.AddCert(cc.Leaf)
					srv := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{sc}}
					cli := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: ServerName}
					if mutual {
						srv.ClientAuth, srv.ClientCAs = tls.RequireAndVerifyClientCert, cpool
						cli.Certificates = []tls.Certificate{cc}
					}
					SetKeyExchange(srv, group)
					SetKeyExchange(cli, group)
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						b.Fatal(err)
					}
					defer ln.Close()
					go func() {
						for {
							c, err := ln.Accept()
							if err != nil {
								return
							}
							go func() {
								tc := tls.Server(c, srv)
								tc.Handshake()
								tc.Read(make([]byte, 1))
								tc.Close()
							}()
						}
					}()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						c, err := net.Dial("tcp", ln.Addr().String())
						if err != nil {
							b.Fatal(err)
						}
						tc := tls.Client(c, cli)
						if err := tc.Handshake(); err != nil {
							b.Fatal(err)
						}
						tc.Close()
					}
				})
			}
		}
	}
}
