package runner

import (
	"context"
	"errors"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// Target is the server under test: how it is started for a point,
// observed and stopped. The built-in one is rdmaprobe's own `serve`
// (target_builtin.go); a server command of the operator's is another
// Target in a file of its own.
type Target interface {
	// Start starts the server for trial of a point with n clients. It
	// returns once the process runs; Server.Ready says when it serves.
	Start(ctx context.Context, n, trial int) (Server, error)
}

// Server is a started target: all the point loop needs of it.
type Server interface {
	// Ready waits until the server accepts clients and returns the
	// address the clients dial, and the device it opened if it says.
	Ready(ctx context.Context, timeout time.Duration) (addr string, dev *result.DeviceInfo, err error)
	// PID is the server's process, sampled by the collectors.
	PID() int
	// Tree, if not nil, lists the server's process and every process it
	// started, which its samples then cover (a server command's
	// workers count as it); nil when the server is its one process.
	Tree() func() []int
	// Events carries what the server reports during the point ("error"
	// events); it is closed when the server exits.
	Events() <-chan protocol.Event
	// ExitText says how the server ended, with its last output; valid
	// once Events is closed.
	ExitText() string
	// Stop ends the server (SIGTERM, SIGKILL after grace), reaps it, and
	// returns its own view of the point if it gives one, and how it
	// exited if that was not cleanly.
	Stop(grace time.Duration) (stats result.ServerStats, exitErr string)
	// Kill ends the server at once and reaps it.
	Kill()
	// Usage is the server's own account of its CPU so far, asked at the
	// start and the end of a traffic phase; ErrNoUsage if it keeps none
	// (the runner then reads its process, where it can see it).
	Usage(timeout time.Duration) (result.ServerUsage, error)
	// Record is what the point records of the server (a command's
	// build, exit and output); nil for rdmaprobe's own, whose view is
	// the point's Server.
	Record() *result.TargetPoint
	// SharesSlack reports whether the runner gives the server the
	// generators' timer slack (protocol.SlackenThreads says why):
	// rdmaprobe's own server does; a command of the operator's keeps its
	// own timers.
	SharesSlack() bool
}

// ErrNoUsage is Server.Usage's error from a server that keeps no
// account of its CPU.
var ErrNoUsage = errors.New("the server keeps no account of its CPU")
