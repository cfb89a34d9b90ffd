package runner

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Event is one JSON line a child process (serve, clients) writes on its
// stdout for the runner. Readiness is announced this way, never guessed.
//
// The protocol, per child: the runner writes the child's spec
// (ServerSpec, GeneratorSpec) as the first line of its stdin; the child
// says "ready" (a server with its address and device), a generator then
// waits for the release, the server's address as the next stdin line,
// reports "progress" while its clients connect and "done" with their
// records, and holds them until its stdin closes. A server says "stats"
// when it stops (SIGTERM). Either may say "error" at any time.
type Event struct {
	Event string `json:"event"` // "ready", "stats", "progress", "done", "error"

	// ready
	Addr   string             `json:"addr,omitempty"`
	PID    int                `json:"pid,omitempty"`
	Device *result.DeviceInfo `json:"device,omitempty"`
	// stats
	Server *result.ServerStats `json:"server,omitempty"`
	// progress, done
	Done    int                   `json:"done,omitempty"`
	OK      int                   `json:"ok,omitempty"`
	Records []result.ClientRecord `json:"records,omitempty"`
	// error
	Error string `json:"error,omitempty"`
}

// Emitter writes events as JSON lines; safe for concurrent use.
type Emitter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewEmitter writes to w.
func NewEmitter(w io.Writer) *Emitter { return &Emitter{enc: json.NewEncoder(w)} }

// Emit writes one event.
func (e *Emitter) Emit(ev Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.enc.Encode(ev)
}
