package server

import (
	"context"
	"net"
	"syscall"
)

var (
	syscallEMFILE = syscall.EMFILE
	syscallENFILE = syscall.ENFILE
)

// listen opens a TCP listener; backlog > 0 asks the kernel for that listen
// queue length instead of Go's default (somaxconn), so a C server's
// listen(sock, 10) can be reproduced.
func listen(ctx context.Context, lc net.ListenConfig, addr string, backlog int) (net.Listener, error) {
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil || backlog <= 0 {
		return ln, err
	}
	tl := ln.(*net.TCPListener)
	rc, err := tl.SyscallConn()
	if err != nil {
		ln.Close()
		return nil, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), backlog) }); err != nil {
		ln.Close()
		return nil, err
	}
	if lerr != nil {
		ln.Close()
		return nil, lerr
	}
	return ln, nil
}
