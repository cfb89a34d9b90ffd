package filelock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestExclusiveExcludesOthers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	ctx := context.Background()
	unlock, err := Lock(ctx, path, false)
	if err != nil {
		t.Fatal(err)
	}
	// While it is held neither another exclusive nor a shared lock is
	// granted: both wait until their context ends.
	for _, shared := range []bool{false, true} {
		wctx, cancel := context.WithTimeout(ctx, 3*poll)
		_, err := Lock(wctx, path, shared)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("shared=%v while an exclusive lock is held: %v, want a deadline", shared, err)
		}
	}
	// Released, it is granted to a waiter.
	got := make(chan error, 1)
	go func() {
		u, err := Lock(ctx, path, false)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a waiter did not get the lock once it was released")
	}
}

func TestSharedLocksCoexist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	ctx := context.Background()
	a, err := Lock(ctx, path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a()
	// A second shared lock is granted at once (no context time needed)…
	done, cancel := context.WithCancel(ctx)
	cancel()
	b, err := Lock(done, path, true)
	if err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
	defer b()
	// …and an exclusive one is not.
	if _, err := Lock(done, path, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("exclusive lock while shared ones are held: %v, want to wait", err)
	}
}

func TestLockMissingDirectory(t *testing.T) {
	_, err := Lock(context.Background(), filepath.Join(t.TempDir(), "no", "lock"), false)
	if err == nil {
		t.Fatal("no error")
	}
}
