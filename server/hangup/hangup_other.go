//go:build !linux

package hangup

import (
	"net"
	"sync"
)

// Watcher (outside Linux) spends a goroutine per connection.
type Watcher struct {
	mu     sync.Mutex
	n      int
	closed bool
}

func New() (*Watcher, error) { return &Watcher{}, nil }

func (w *Watcher) Watch(c Conn, gone func()) (stop func(), err error) {
	nc, ok := c.(net.Conn)
	if !ok {
		return nil, net.UnknownNetworkError("hangup: not a net.Conn")
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, ErrClosed
	}
	w.n++
	w.mu.Unlock()
	var once sync.Once
	stopped := make(chan struct{})
	finish := func() {
		w.mu.Lock()
		w.n--
		w.mu.Unlock()
	}
	go func() {
		var b [1]byte
		nc.Read(b[:])
		select {
		case <-stopped:
		default:
			once.Do(func() { finish(); gone() })
		}
	}()
	return func() { once.Do(func() { finish(); close(stopped) }) }, nil
}

func (w *Watcher) Watching() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *Watcher) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	return nil
}
