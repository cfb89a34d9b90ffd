package runner

import (
	"context"
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

// Server is a started target.
type Server interface {
	// Ready waits until the server accepts clients and returns the
	// address the clients dial, and the device it opened if it says.
	Ready(ctx context.Context, timeout time.Duration) (addr string, dev *result.DeviceInfo, err error)
	// PID is the server's process, sampled by the collectors.
	PID() int
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
}
