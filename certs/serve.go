package certs

import (
	"fmt"
	"os"
)

// ServerPair is serve's pair: the one in certPath and keyPath (--cert,
// --key: both or neither), or a self-signed one, whose certificate goes
// to certOut (--cert-out) for clients to pin when it is set.
func ServerPair(certPath, keyPath, certOut string) (Pair, error) {
	if (certPath == "") != (keyPath == "") {
		return Pair{}, fmt.Errorf("--cert and --key go together")
	}
	if certPath != "" {
		return Load(certPath, keyPath)
	}
	pair, err := SelfSigned()
	if err != nil || certOut == "" {
		return pair, err
	}
	return pair, os.WriteFile(certOut, pair.CertPEM, 0o644)
}

// ClientCAs is the PEM of the client certificates serve authorises: the
// ones in caPath (--client-ca), or a client pair generated now, written
// to certOut and keyOut (--client-cert-out, --client-key-out, both or
// neither) for the clients to present.
func ClientCAs(caPath, certOut, keyOut string) ([]byte, error) {
	if caPath != "" {
		if certOut != "" || keyOut != "" {
			return nil, fmt.Errorf("--client-cert-out/--client-key-out write a generated client pair; with --client-ca none is generated")
		}
		return os.ReadFile(caPath)
	}
	if (certOut == "") != (keyOut == "") {
		return nil, fmt.Errorf("--client-cert-out and --client-key-out go together")
	}
	pair, err := SelfSignedClient()
	if err != nil {
		return nil, err
	}
	if keyOut != "" {
		if err := pair.WriteFilesAs(certOut, keyOut); err != nil {
			return nil, err
		}
	}
	return pair.CertPEM, nil
}
