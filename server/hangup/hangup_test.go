package hangup

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// pair returns the server end (accepted) and the client end of a loopback
// TCP connection.
func pair(t *testing.T, ln net.Listener) (server, client net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return s, c
}

func listen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func newWatcher(t *testing.T) *Watcher {
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// await fails the test unless ch is signalled within a generous guard.
func await(t *testing.T, ch <-chan int, what string) int {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return 0
	}
}

func TestPeerLeaves(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave func(net.Conn)
	}{
		{"close", func(c net.Conn) { c.Close() }},
		{"reset", func(c net.Conn) { c.(*net.TCPConn).SetLinger(0); c.Close() }},
		{"stray byte", func(c net.Conn) { c.Write([]byte{0x15}) }},
		{"half close", func(c net.Conn) { c.(*net.TCPConn).CloseWrite() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, w := listen(t), newWatcher(t)
			s, c := pair(t, ln)
			fired := make(chan int, 2)
			if _, err := w.Watch(s.(*net.TCPConn), func() { fired <- 1 }); err != nil {
				t.Fatal(err)
			}
			if w.Watching() != 1 {
				t.Fatalf("watching %d, want 1", w.Watching())
			}
			tc.leave(c)
			await(t, fired, "gone")
			if n := w.Watching(); n != 0 {
				t.Errorf("still watching %d after the peer left", n)
			}
			select {
			case <-fired:
				t.Error("gone called twice")
			default:
			}
		})
	}
}

// A stopped watch never fires, even when its peer leaves later; the
// others still do.
func TestStop(t *testing.T) {
	ln, w := listen(t), newWatcher(t)
	s1, c1 := pair(t, ln)
	s2, c2 := pair(t, ln)
	fired := make(chan int, 4)
	stop1, err := w.Watch(s1.(*net.TCPConn), func() { fired <- 1 })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Watch(s2.(*net.TCPConn), func() { fired <- 2 }); err != nil {
		t.Fatal(err)
	}
	stop1()
	stop1() // idempotent
	if w.Watching() != 1 {
		t.Fatalf("watching %d after stop, want 1", w.Watching())
	}
	c1.Close()
	c2.Close()
	if v := await(t, fired, "the second peer"); v != 2 {
		t.Fatalf("stopped watch fired (%d)", v)
	}
	// The server side of 1 can now be closed and its number reused.
	s1.Close()
	s3, c3 := pair(t, ln)
	if _, err := w.Watch(s3.(*net.TCPConn), func() { fired <- 3 }); err != nil {
		t.Fatal(err)
	}
	c3.Close()
	if v := await(t, fired, "the third peer"); v != 3 {
		t.Fatalf("got %d, want 3", v)
	}
}

// Many idle connections cost no goroutine each.
func TestManyWithoutGoroutines(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the epoll watcher is Linux-only; elsewhere it is a goroutine per connection")
	}
	const n = 500
	ln, w := listen(t), newWatcher(t)
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	wg.Add(n)
	var clients []net.Conn
	for i := 0; i < n; i++ {
		s, c := pair(t, ln)
		clients = append(clients, c)
		if _, err := w.Watch(s.(*net.TCPConn), wg.Done); err != nil {
			t.Fatal(err)
		}
	}
	if g := runtime.NumGoroutine() - before; g > 5 {
		t.Errorf("%d goroutines for %d watched connections", g, n)
	}
	if w.Watching() != n {
		t.Errorf("watching %d, want %d", w.Watching(), n)
	}
	for _, c := range clients {
		c.Close()
	}
	done := make(chan int)
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of %d still watched", w.Watching(), n)
	}
}

func TestClose(t *testing.T) {
	ln := listen(t)
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	s, c := pair(t, ln)
	fired := make(chan int, 1)
	if _, err := w.Watch(s.(*net.TCPConn), func() { fired <- 1 }); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := w.Watch(s.(*net.TCPConn), func() {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch after Close: %v, want ErrClosed", err)
	}
	c.Close()
	select {
	case <-fired:
		t.Error("a closed watcher fired")
	default:
	}
}
