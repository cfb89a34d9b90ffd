package app

import (
	"bytes"
	"context"
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- MainContext(ctx, []string{"rdmaprobe", "serve", "--backend", "sim", "--listen", "127.0.0.1:0",
			"--max-clients", "5", "--detach", "--msg-size", "64", "--cert-out", f("ca.pem"),
			"--client-cert-out", f("cert.pem"), "--client-key-out", f("key.pem"), "--ready-file", f("addr")},
			Streams{In: bytes.NewReader(nil), Out: &out, Err: &errOut})
	}()
	var addr []byte
	if !eventually.Within(10*time.Second, func() bool {
		addr, _ = os.ReadFile(f("addr"))
		return len(addr) > 0
	}) {
		cancel()
		<-done
		t.Fatalf("server not ready: %s %s", out.String(), errOut.String())
	}
	cout, cerr, code := run(t, "clients", "--backend", "sim", "--addr", strings.TrimSpace(string(addr)), "--n", "5",
		"--rounds", "2", "--msg-size", "64", "--timeout", "20s", "--ca", f("ca.pem"), "--cert", f("cert.pem"), "--key", f("key.pem"))
	if code != 0 || !strings.Contains(cout, "5/5 clients connected") {
		t.Errorf("clients: exit %d\n%s\n%s", code, cout, cerr)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"detached (clients leave with a goodbye over their QP)",
		"stopped: 5 accepted, 5 connected, 0 refused at capacity, peak 5, 5 released (5 on their goodbye)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "failure") {
		t.Errorf("goodbyes counted as failures:\n%s", out.String())
	}
}
