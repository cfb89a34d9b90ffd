// Package protocol is what the runner and its child processes agree on:
// the specs a child reads as the first line of its stdin (ServerSpec,
// GeneratorSpec, with the Fabric to open), the lines the runner writes
// after it (the release, StartTraffic, ServerRequestUsage, heartbeats),
// the Event lines a child writes on its stdout, and the timer slack both
// sides keep while clients connect. Package runner is the parent's side,
// package child the children's; both import this one and nothing of
// each other.
package protocol

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
// records, and holds them until its stdin closes. With a traffic phase
// (GeneratorSpec.Traffic), the runner writes "traffic" on its stdin once
// every generator is done: the generator runs the phase, says "traffic"
// with its clients' result.Traffic (and "traffic-progress" with the
// messages so far once a second before that), and holds them again until
// its stdin closes. Its phase's window lasts until every generator's clients are
// measured: a generator says "measured" when its own are, and the
// runner writes "traffic-end" once all have (client.SharedWindow). A server says "stats"
// when it stops (SIGTERM); asked "usage" on its stdin after its spec, it
// says "usage" with its CPU so far (result.ServerUsage). Either may say
// "error" at any time.
//
// A generator first says "started" with its process ID, before it reads
// its spec: on another host, that PID is what the runner kills it by
// over the launcher. Its "ready" carries its host's environment and the
// device it opened, its "done" its own resource usage. On another host
// the launcher's wrapper says "exit" with the generator's exit status
// when it ends (RemoteCommand), which tells a generator that died from a
// launcher that lost its connection.
type Event struct {
	Event string `json:"event"` // "started", "ready", "stats", "usage", "progress", "done", "measured", "traffic-progress", "traffic", "error", "exit"

	// started, ready
	PID int `json:"pid,omitempty"`
	// ready
	Addr   string              `json:"addr,omitempty"`
	Device *result.DeviceInfo  `json:"device,omitempty"`
	Env    *result.Environment `json:"env,omitempty"`
	// exit
	Status int `json:"status,omitempty"`
	// stats
	Server *result.ServerStats `json:"server,omitempty"`
	// progress, done
	Done int `json:"done,omitempty"`
	OK   int `json:"ok,omitempty"`
	// Records travel as a run saves them (result.RecordColumns): a
	// generator's done line carries every client it ran.
	Records result.Records `json:"records,omitempty"`
	// done: the clients never launched (client.Load.WallStop)
	Unlaunched int `json:"unlaunched,omitempty"`
	// progress: the failed clients so far by outcome class, cumulative
	// (bounded by the classes, however many clients)
	Failed map[string]int `json:"failed,omitempty"`
	// progress: the connect phases so far, per phase the count of
	// clients in each of result.PhaseBounds' buckets, cumulative (bounded by
	// the phases and buckets)
	Phases map[string][]int       `json:"phases,omitempty"`
	Usage  *result.GeneratorUsage `json:"usage,omitempty"`
	// usage: the server's answer to a "usage" request (ServerRequestUsage)
	ServerUsage *result.ServerUsage `json:"server_usage,omitempty"`
	// traffic-progress: the messages its clients completed in the
	// traffic window so far, once a second while it is open
	Messages int64 `json:"messages,omitempty"`
	// traffic: a generator's clients' traffic phase
	Traffic *result.Traffic `json:"traffic,omitempty"`
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
