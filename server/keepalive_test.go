package server_test

import (
	"context"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// A held client's TCP socket is idle for good. Only the server's end
// probes it, and only after minutes idle; the client's end has no
// keepalive timer at all. With Go's default (15 s, both ends) a held
// client cost two probes and two answers every 15 s, work that grows
// with the clients held.
func TestKeepAliveOnlyFromTheServer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the sockets' timers from /proc/net/tcp (Linux)")
	}
	const n = 5
	h := newHarnessOpts(t, n, harnessOpts{mode: server.ModeSRQ})
	recs, conns, _ := client.Run(context.Background(), h.dialer, client.Load{N: n}, nil)
	defer client.CloseAll(conns)
	for _, r := range recs {
		if r.Outcome != "ok" {
			t.Fatalf("client %d: %s: %s", r.ID, r.Outcome, r.Error)
		}
	}
	_, p, _ := net.SplitHostPort(h.addr)
	port, _ := strconv.Atoi(p)
	// Once the exchanges' last bytes are acknowledged, no end has a
	// retransmit timer: what is left is keepalive (timer 2) or none (0).
	var srv, cl []tcpTimer
	if !eventually.Within(guard, func() bool {
		srv, cl = socketTimers(t, port)
		if len(srv) != n || len(cl) != n {
			return false
		}
		for _, s := range append(append([]tcpTimer{}, srv...), cl...) {
			if s.timer == 1 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("sockets of port %d: server ends %+v, client ends %+v; want %d each without a retransmit timer", port, srv, cl, n)
	}
	for _, s := range srv {
		// The first probe is due a few minutes ahead, not in 15 s.
		if s.timer != 2 || s.when < time.Minute {
			t.Errorf("a server end's timer %+v: want keepalive, minutes away", s)
		}
	}
	for _, s := range cl {
		if s.timer != 0 {
			t.Errorf("a client end's timer %+v: want none", s)
		}
	}
}

// tcpTimer is one established socket's timer in /proc/net/tcp: 0 none,
// 1 retransmit, 2 keepalive, ...; when is the time left on it.
type tcpTimer struct {
	timer int
	when  time.Duration
}

// socketTimers reads the established loopback sockets whose local port
// (the server's ends) or remote port (the clients') is port.
func socketTimers(t *testing.T, port int) (server, clients []tcpTimer) {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	portOf := func(addr string) int {
		i := strings.LastIndexByte(addr, ':')
		v, _ := strconv.ParseInt(addr[i+1:], 16, 32)
		return int(v)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) < 6 || f[3] != "01" {
			continue
		}
		tr, when, _ := strings.Cut(f[5], ":")
		kind, _ := strconv.ParseInt(tr, 16, 32)
		// In clock ticks of USER_HZ, 100 a second on Linux.
		ticks, _ := strconv.ParseInt(when, 16, 64)
		tm := tcpTimer{timer: int(kind), when: time.Duration(ticks) * 10 * time.Millisecond}
		switch port {
		case portOf(f[1]):
			server = append(server, tm)
		case portOf(f[2]):
			clients = append(clients, tm)
		}
	}
	return server, clients
}
