// Package certs makes the TLS 1.3 configuration of the exchange: a
// self-signed ECDSA P-256 server certificate generated at start (or loaded
// from files) and clients that pin exactly that certificate; and, for
// mutual TLS, self-signed client certificates the server requires and
// verifies before it reads a client's hello.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ServerName is the name clients verify; the certificate also covers the
// loopback addresses.
const ServerName = "rdmaprobe"

// Pair is a certificate and its key in PEM.
type Pair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// ClientName is the common name of generated client certificates.
const ClientName = "rdmaprobe-client"

// SelfSigned generates a fresh ECDSA P-256 server certificate valid for a
// day.
func SelfSigned() (Pair, error) {
	return selfSigned(ServerName, []string{ServerName, "localhost"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, x509.ExtKeyUsageServerAuth)
}

// SelfSignedClient generates a fresh ECDSA P-256 client certificate valid
// for a day, in the same style as SelfSigned but for client
// authentication. The server authorises it by listing it among its client
// CAs.
func SelfSignedClient() (Pair, error) {
	return selfSigned(ClientName, nil, nil, x509.ExtKeyUsageClientAuth)
}

func selfSigned(cn string, dns []string, ips []net.IP, eku x509.ExtKeyUsage) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return Pair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		DNSNames:              dns,
		IPAddresses:           ips,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{eku},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

// WriteFiles writes cert.pem and key.pem into dir; the key is 0600.
func (p Pair) WriteFiles(dir string) (certPath, keyPath string, err error) {
	certPath = filepath.Join(dir, "cert.pem")
	keyPath = filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, p.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, p.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// Load reads a pair from PEM files.
func Load(certPath, keyPath string) (Pair, error) {
	c, err := os.ReadFile(certPath)
	if err != nil {
		return Pair{}, err
	}
	k, err := os.ReadFile(keyPath)
	if err != nil {
		return Pair{}, err
	}
	return Pair{CertPEM: c, KeyPEM: k}, nil
}

// WriteFilesAs writes the pair to certPath and keyPath; the key is 0600.
func (p Pair) WriteFilesAs(certPath, keyPath string) error {
	if err := os.WriteFile(certPath, p.CertPEM, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, p.KeyPEM, 0o600); err != nil {
		return err
	}
	// WriteFile keeps the mode of a file that already exists.
	return os.Chmod(keyPath, 0o600)
}

// Server returns a TLS 1.3-only server configuration. With clientCAs (PEM,
// one or more certificates) it is mutual TLS: the handshake requires a
// client certificate and verifies it against exactly those certificates,
// so an unauthenticated peer never reaches the exchange. Without it (only
// the bare-TLS figures of bench) clients are not authenticated.
func (p Pair) Server(clientCAs ...[]byte) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("load server certificate: %w", err)
	}
	conf := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
	}
	if len(clientCAs) > 0 {
		pool := x509.NewCertPool()
		for _, ca := range clientCAs {
			if !pool.AppendCertsFromPEM(ca) {
				return nil, errors.New("no certificate found in the client CA PEM")
			}
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// Client returns a TLS 1.3-only client configuration that trusts only the
// given server certificate (pinning) and, given a client pair, presents it
// for mutual TLS.
func Client(serverPEM []byte, clientPair ...Pair) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(serverPEM) {
		return nil, errors.New("no certificate found in the server certificate PEM")
	}
	conf := &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		ServerName: ServerName,
		// No session cache: every client pays a full handshake, as
		// independent clients would.
	}
	for _, cp := range clientPair {
		cert, err := tls.X509KeyPair(cp.CertPEM, cp.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		conf.Certificates = append(conf.Certificates, cert)
	}
	return conf, nil
}
