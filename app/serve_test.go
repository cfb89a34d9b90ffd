package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
)

// serve --detach with its own clients, as an operator runs them: the
// server says it is detached, the clients connect with their round trips
// over a closed control connection, and their goodbyes leave nothing
// counted as a failure.
func TestServeDetachedWithClients(t *testing.T) {
	dir := t.TempDir()
	f := func(name string) string { return filepath.Join(dir, name) }
	serve := runAsync(t, "serve", "--backend", "sim", "--listen", "127.0.0.1:0",
		"--max-clients", "5", "--detach", "--msg-size", "64", "--cert-out", f("ca.pem"),
		"--client-cert-out", f("cert.pem"), "--client-key-out", f("key.pem"), "--ready-file", f("addr"))
	var addr []byte
	if !eventually.Within(10*time.Second, func() bool {
		addr, _ = os.ReadFile(f("addr"))
		return len(addr) > 0
	}) {
		serve.interrupt()
		r := <-serve.done
		t.Fatalf("server not ready: %s %s", r.out, r.errOut)
	}
	cout, cerr, code := run(t, "clients", "--backend", "sim", "--addr", strings.TrimSpace(string(addr)), "--n", "5",
		"--rounds", "2", "--msg-size", "64", "--timeout", "20s", "--ca", f("ca.pem"), "--cert", f("cert.pem"), "--key", f("key.pem"))
	if code != 0 || !strings.Contains(cout, "5/5 clients connected") {
		t.Errorf("clients: exit %d\n%s\n%s", code, cout, cerr)
	}
	serve.interrupt()
	r := <-serve.done
	if r.code != 0 {
		t.Fatalf("serve: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
	for _, want := range []string{"detached (clients leave with a goodbye over their QP)",
		"stopped: 5 accepted, 5 connected, 0 refused at capacity, peak 5, 5 released (5 on their goodbye)\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("serve output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "failure") {
		t.Errorf("goodbyes counted as failures:\n%s", r.out)
	}
}
