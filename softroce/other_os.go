//go:build !linux

package softroce

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"
)

// The vm backend needs Linux on both sides (finit_module and netlink in
// the guest, Pdeathsig and socketpair handling on the host); elsewhere the
// package compiles so the app does, and reports itself unavailable.

var errNotLinux = errors.New("softroce: the vm backend runs on Linux hosts only")

func IsGuest() bool { return false }

func GuestMain(Handler) {
	os.Stderr.WriteString(errNotLinux.Error() + "\n")
	os.Exit(1)
}

func Boot(context.Context, BootConfig) (*Guest, error) { return nil, errNotLinux }

func NewLink() (a, b *LinkEnd, err error) { return nil, nil, errNotLinux }

func (g *Guest) Call(context.Context, string, any, func(json.RawMessage)) (json.RawMessage, error) {
	return nil, errNotLinux
}

func (g *Guest) Exec(context.Context, time.Duration, ...string) (ExecResult, error) {
	return ExecResult{}, errNotLinux
}

func (g *Guest) Close() error { return nil }

// Exited never closes: no guest runs here.
func (g *Guest) Exited() <-chan struct{} { return nil }
