package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// HandshakeRate measures how fast this machine is right now: mutual TLS
// 1.3 handshakes with the given configurations, one at a time, both ends
// in this process over an in-memory pipe (CPU only: no sockets, no
// scheduler of another process), for at least window and at least 3
// handshakes. It returns handshakes per second.
//
// A probe point takes it just before and just after its clients run. On a
// host whose speed moves (a QEMU TCG guest on a shared or nested machine,
// a cloud VM) it moves with it: a trial's connect rate divided by it
// compares trials taken at different host speeds, and a low figure says
// the host, not the server, was slow.
func HandshakeRate(ctx context.Context, srv, cli *tls.Config, window time.Duration) (float64, error) {
	if srv == nil || cli == nil {
		return 0, errors.New("calibration needs a server and a client TLS configuration")
	}
	// No tickets: a server writes them after the handshake, and nobody
	// reads a net.Pipe after it.
	srv = srv.Clone()
	srv.SessionTicketsDisabled = true
	start := time.Now()
	n := 0
	for n < 3 || time.Since(start) < window {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := pipeHandshake(ctx, srv, cli); err != nil {
			return 0, fmt.Errorf("calibration handshake: %w", err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func pipeHandshake(ctx context.Context, srv, cli *tls.Config) error {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	// A failed side closes its end so the other side's read fails too
	// instead of waiting for ever.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s := tls.Server(b, srv)
		err := s.HandshakeContext(ctx)
		if err != nil {
			b.Close()
		}
		done <- err
	}()
	c := tls.Client(a, cli)
	cerr := c.HandshakeContext(ctx)
	// The server has read all the client wrote (a pipe write returns when
	// it is read); closing now fails at once the alert a rejecting server
	// would otherwise wait for ever to write.
	a.Close()
	serr := <-done
	if cerr != nil {
		return cerr
	}
	return serr
}
