package hangup

import (
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Watcher watches connections for their peer leaving.
type Watcher struct {
	epfd, wake int

	mu     sync.Mutex
	gone   map[int32]func() // by fd
	closed bool
	done   chan struct{}
}

// New starts a watcher; Close stops it.
func New() (*Watcher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("hangup: epoll_create1: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("hangup: eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(wake)
		unix.Close(epfd)
		return nil, fmt.Errorf("hangup: watch eventfd: %w", err)
	}
	w := &Watcher{epfd: epfd, wake: wake, gone: map[int32]func(){}, done: make(chan struct{})}
	go w.loop()
	return w, nil
}

// Watch calls gone once, from the watcher's goroutine, when c's peer
// leaves. The returned stop ends the watch (gone is then never called)
// and must run before c is closed, so a reused descriptor number is never
// mistaken for c.
func (w *Watcher) Watch(c Conn, gone func()) (stop func(), err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int32 = -1
	var cerr error
	if err := rc.Control(func(f uintptr) {
		fd = int32(f)
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.closed {
			cerr = ErrClosed
			return
		}
		w.gone[fd] = gone
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: fd}
		if cerr = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev); cerr != nil {
			delete(w.gone, fd)
			cerr = fmt.Errorf("hangup: epoll_ctl add: %w", cerr)
		}
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	return func() { w.stop(fd) }, nil
}

func (w *Watcher) stop(fd int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.gone[fd]; !ok {
		return // already reported, or the watcher closed
	}
	delete(w.gone, fd)
	if !w.closed {
		unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	}
}

// Watching is the number of connections being watched.
func (w *Watcher) Watching() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.gone)
}

func (w *Watcher) loop() {
	defer close(w.done)
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		var fire []func()
		w.mu.Lock()
		for _, ev := range events[:n] {
			if int(ev.Fd) == w.wake {
				w.mu.Unlock()
				return
			}
			if f, ok := w.gone[ev.Fd]; ok {
				delete(w.gone, ev.Fd)
				// ONESHOT disabled it; remove it so the number can be reused.
				unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
				fire = append(fire, f)
			}
		}
		w.mu.Unlock()
		for _, f := range fire {
			f()
		}
	}
}

// Close stops watching; pending watches never fire.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.gone = map[int32]func(){}
	w.mu.Unlock()
	var one [8]byte
	one[0] = 1
	if _, err := unix.Write(w.wake, one[:]); err != nil && err != syscall.EAGAIN {
		return err
	}
	<-w.done
	unix.Close(w.wake)
	return unix.Close(w.epfd)
}
