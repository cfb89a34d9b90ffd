package fabric

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// VerbError is a failed verbs call: the verb's name and its errno.
type VerbError struct {
	Verb  string // e.g. "ibv_create_qp", "ibv_modify_qp(RTR)"
	Errno syscall.Errno
	// Detail adds context that the errno alone does not give.
	Detail string
}

func (e *VerbError) Error() string {
	s := fmt.Sprintf("%s: %s (%s)", e.Verb, ErrnoName(e.Errno), e.Errno.Error())
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *VerbError) Unwrap() error { return e.Errno }

// Errno extracts the errno of a VerbError in err's chain, or 0.
func Errno(err error) syscall.Errno {
	var ve *VerbError
	if errors.As(err, &ve) {
		return ve.Errno
	}
	return 0
}

// ErrnoName returns an errno's symbolic name ("ENOMEM"), or "errno N"
// for one the system does not name: the key failures are counted under.
func ErrnoName(e syscall.Errno) string {
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return fmt.Sprintf("errno %d", int(e))
}

// WCError is a completion with a non-success status.
type WCError struct {
	Op     string // "send", "recv"
	Status WCStatus
}

func (e *WCError) Error() string {
	return fmt.Sprintf("%s completion: %s (status %d)", e.Op, e.Status, int(e.Status))
}
