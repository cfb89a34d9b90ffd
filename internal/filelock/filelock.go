// Package filelock holds advisory locks (flock(2)) on files that several
// processes share: the build caches under ~/.cache/rdmaprobe, which the
// test binaries of one `go test ./...` (run in parallel), two checkouts
// on one machine, or two CI jobs sharing a home all use at once.
//
// The lock belongs to the open file, not to the process, so two
// goroutines that each call Lock exclude each other as two processes do,
// and a process that dies releases its locks with its files.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// poll is how often a waiting Lock retries: flock(2) cannot be
// interrupted by a context, so Lock asks without blocking and waits
// between tries.
const poll = 20 * time.Millisecond

// Lock takes an exclusive lock on the file at path (creating it), or a
// shared one if shared is set, waiting for other holders until ctx ends.
// The returned function releases it.
func Lock(ctx context.Context, path string, shared bool) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	var tick *time.Ticker
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if tick == nil {
			tick = time.NewTicker(poll)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the lock on %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
	// Closing the file releases the lock.
	return func() { f.Close() }, nil
}
