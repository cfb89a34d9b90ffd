// Package certs makes the TLS 1.3 configuration of the exchange: a
// self-signed Ed25519 server certificate generated at start (or loaded
// from files) and clients that pin exactly that certificate; and, for
// mutual TLS, self-signed client certificates the server requires and
// verifies before it reads a client's hello.
//
// Ed25519 rather than ECDSA P-256: the same 128-bit security level, and
// in the Soft-RoCE guest (QEMU TCG) a mutual handshake costs ~20% less
// CPU with it (BenchmarkHandshake). Loaded pairs may be of any type Go's
// TLS stack accepts.
package certs

import (
	"bytes"
	"crypto/ed25519"
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
	"strings"
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

// SelfSigned generates a fresh Ed25519 server certificate valid for a day.
func SelfSigned() (Pair, error) {
	return selfSigned(ServerName, []string{ServerName, "localhost"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, x509.ExtKeyUsageServerAuth)
}

// SelfSignedClient generates a fresh Ed25519 client certificate valid for
// a day, in the same style as SelfSigned but for client
// authentication. The server authorises it by listing it among its client
// CAs.
func SelfSignedClient() (Pair, error) {
	return selfSigned(ClientName, nil, nil, x509.ExtKeyUsageClientAuth)
}

func selfSigned(cn string, dns []string, ips []net.IP, eku x509.ExtKeyUsage) (Pair, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return Pair{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}, nil
}

// Pairs are a run's two pairs: the server's, which clients pin, and the
// clients', which the server authorises (mutual TLS).
type Pairs struct {
	Server Pair `json:"server"`
	Client Pair `json:"client"`
}

// NewPairs generates a run's server and client pairs. A run makes them
// once and hands the PEMs to every server and load generator it starts:
// keys travel in the children's spec on their stdin, never in argv or on
// disk.
func NewPairs() (Pairs, error) {
	s, err := SelfSigned()
	if err != nil {
		return Pairs{}, fmt.Errorf("server certificate: %w", err)
	}
	c, err := SelfSignedClient()
	if err != nil {
		return Pairs{}, fmt.Errorf("client certificate: %w", err)
	}
	return Pairs{Server: s, Client: c}, nil
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
		// No session tickets unless a caller turns them on for clients
		// that resume: a ticket is built, encrypted (with the client's
		// certificate inside) and sent after every handshake, one more
		// record each way that nobody would use.
		SessionTicketsDisabled: true,
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

// Pinned is Client for load generators: a server that presents exactly
// one of the certificates in serverPEM (the run's own server, whose
// certificate the run made) is accepted by a byte comparison and its
// validity period, instead of x509 path validation, whose policy check
// alone was 3% of a generator's CPU per connect in the TCG guest (pprof
// of 1000 clients) and is what the pin already settles. Any other
// certificate, such as one a pinned CA signed, is verified as Client
// would. The handshake itself is unchanged: TLS still checks the
// server's signature over the transcript with that certificate's key,
// and the client presents its own for mutual TLS. The run's calibration
// and the bench use Client, so their figures are a standard client's.
func Pinned(serverPEM []byte, clientPair ...Pair) (*tls.Config, error) {
	conf, err := Client(serverPEM, clientPair...)
	if err != nil {
		return nil, err
	}
	var pins [][]byte
	for rest := serverPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			pins = append(pins, b.Bytes)
		}
	}
	roots, name := conf.RootCAs, conf.ServerName
	// Path validation moves to VerifyConnection, which TLS calls on every
	// handshake (resumed ones too) before it trusts the peer.
	conf.InsecureSkipVerify = true
	conf.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server presented no certificate")
		}
		leaf := cs.PeerCertificates[0]
		for _, pin := range pins {
			if bytes.Equal(pin, leaf.Raw) {
				if now := time.Now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
					return fmt.Errorf("pinned server certificate valid from %s to %s, not now", leaf.NotBefore, leaf.NotAfter)
				}
				return nil
			}
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err
	}
	return conf, nil
}

// Key exchanges of the handshake (TLS 1.3 supported groups).
const (
	// KexHybrid is Go's default: X25519MLKEM768 (post-quantum hybrid)
	// first, classical groups as fallback.
	KexHybrid = "hybrid"
	// KexX25519 is classical X25519 only: no ML-KEM key generation and
	// encapsulation per handshake, which in the TCG guest is ~25% of a
	// mutual handshake's CPU. The exchange carries QPN/PSN/GID, worthless
	// once the run ends, so the post-quantum protection of recorded
	// traffic buys nothing here; authentication is unchanged.
	KexX25519 = "x25519"
	// KexP256 is classical ECDHE on NIST P-256, the same security level
	// as X25519; Go computes it with an assembly P-256 and a precomputed
	// base-point table, X25519 with neither.
	KexP256 = "p256"
)

// KeyExchanges lists the accepted --tls-kex values.
var KeyExchanges = []string{KexHybrid, KexX25519, KexP256}

// SetKeyExchange restricts conf to the named key exchange.
func SetKeyExchange(conf *tls.Config, kex string) error {
	switch kex {
	case KexHybrid, "":
		conf.CurvePreferences = nil
	case KexX25519:
		conf.CurvePreferences = []tls.CurveID{tls.X25519}
	case KexP256:
		conf.CurvePreferences = []tls.CurveID{tls.CurveP256}
	default:
		return fmt.Errorf("unknown TLS key exchange %q (want %s)", kex, strings.Join(KeyExchanges, ", "))
	}
	return nil
}

// Describe names the pair's key type and the key exchange, e.g.
// "Ed25519, self-signed, TLS 1.3, key exchange x25519", for saved runs.
func Describe(p Pair, kex string) string {
	if kex == "" {
		kex = KexHybrid
	}
	kind := "unknown key"
	if c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM); err == nil && c.Leaf != nil {
		kind = c.Leaf.PublicKeyAlgorithm.String()
		if c.Leaf.Subject.String() == c.Leaf.Issuer.String() {
			kind += ", self-signed"
		}
	}
	return kind + ", TLS 1.3, key exchange " + kex
}
