package certs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve's pairs: a generated server certificate and client pair go
// where asked, the client key 0600; flags that go together are refused
// alone.
func TestServePairs(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "server.pem")
	pair, err := ServerPair("", "", out)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != string(pair.CertPEM) {
		t.Errorf("--cert-out holds %d bytes (%v), want the certificate", len(b), err)
	}
	if _, err := ServerPair("c.pem", "", ""); err == nil || !strings.Contains(err.Error(), "--cert and --key go together") {
		t.Errorf("--cert alone: %v", err)
	}
	cert, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	ca, err := ClientCAs("", cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(cert); string(b) != string(ca) {
		t.Error("--client-cert-out does not hold the authorised certificate")
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("client key: %v, %v", st, err)
	}
	if got, err := ClientCAs(cert, "", ""); err != nil || string(got) != string(ca) {
		t.Errorf("--client-ca: %v", err)
	}
	for _, args := range [][3]string{{cert, cert, ""}, {"", cert, ""}} {
		if _, err := ClientCAs(args[0], args[1], args[2]); err == nil {
			t.Errorf("ClientCAs%q passed", args)
		}
	}
}
