package fabric

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// Errnos are named as the system names them, and one it does not name
// still reads as a number rather than "".
func TestErrnoName(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		want  string
	}{
		{syscall.ENOMEM, "ENOMEM"},
		{syscall.EINVAL, "EINVAL"},
		{syscall.EADDRNOTAVAIL, "EADDRNOTAVAIL"},
		{syscall.EEXIST, "EEXIST"}, // beyond the names a hand-written list kept
		{syscall.Errno(4095), "errno 4095"},
		{syscall.Errno(0), "errno 0"},
	} {
		if got := ErrnoName(tc.errno); got != tc.want {
			t.Errorf("ErrnoName(%d) = %q, want %q", int(tc.errno), got, tc.want)
		}
	}
}

// A VerbError reads as verb, name and text, and its errno is found
// through wrapping.
func TestVerbError(t *testing.T) {
	err := fmt.Errorf("create QP for client 3: %w", &VerbError{Verb: "ibv_create_qp", Errno: syscall.ENOMEM, Detail: "max_qp 2"})
	if got, want := err.Error(), "create QP for client 3: ibv_create_qp: ENOMEM (cannot allocate memory): max_qp 2"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if Errno(err) != syscall.ENOMEM || !errors.Is(err, syscall.ENOMEM) {
		t.Errorf("errno of %v: %d", err, Errno(err))
	}
	if Errno(errors.New("plain")) != 0 {
		t.Error("an error without a VerbError has an errno")
	}
}
