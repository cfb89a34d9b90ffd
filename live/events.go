package live

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Event types (Event.Type), in the order a run writes them.
const (
	EventRunStart   = "run_start"
	EventPointStart = "point_start"
	EventProgress   = "progress"
	EventPointEnd   = "point_end"
	EventDecision   = "decision"
	EventNote       = "note"
	EventRunEnd     = "run_end"
)

// Event is one line of --events. Type says which fields are set;
// docs/events.md is the reference.
type Event struct {
	Type string    `json:"type"`
	TS   time.Time `json:"ts"`
	// run_start: the run as first saved (configuration, backend, host),
	// and its ID (the name of its results directory).
	RunID string      `json:"run_id,omitempty"`
	Run   *result.Run `json:"run,omitempty"`
	// point_start, progress, decision: the point's client count.
	Clients int `json:"clients,omitempty"`
	Trial   int `json:"trial,omitempty"`
	// point_start, progress, point_end: the point's server design.
	Design string `json:"design,omitempty"`
	// progress: clients with an outcome so far, and connected of them.
	Done int `json:"done,omitempty"`
	// progress: failed clients so far by outcome class.
	Failed    map[string]int `json:"failed,omitempty"`
	Connected int            `json:"connected,omitempty"`
	Elapsed   float64        `json:"elapsed_sec,omitempty"`
	// point_end: the point as run.json records it, without its per-client
	// records and its collector samples.
	Point *result.Point `json:"point,omitempty"`
	// decision: why the strategy measures Clients next; note: a note.
	Reason string `json:"reason,omitempty"`
	Note   string `json:"note,omitempty"`
	// run_end: the answer, the point cut short if any, where run.json
	// is, and why the run stopped early.
	Search      *result.Search `json:"search,omitempty"`
	Interrupted *result.Point  `json:"interrupted,omitempty"`
	// run_end: the run's verdict as run.json saves it.
	Verdict  *result.Verdict `json:"verdict,omitempty"`
	Path     string          `json:"path,omitempty"`
	Complete bool            `json:"complete,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// ProgressEvery is how often a point's progress is written.
const ProgressEvery = time.Second

// Events writes a run's events as JSON lines. Its methods are safe for
// concurrent use and do nothing on a nil *Events.
type Events struct {
	mu       sync.Mutex
	enc      *json.Encoder
	err      error
	design   string
	clients  int
	trial    int
	started  time.Time
	lastProg time.Time
}

// NewEvents writes to w.
func NewEvents(w io.Writer) *Events { return &Events{enc: json.NewEncoder(w)} }

// Err is the first write error.
func (e *Events) Err() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

func (e *Events) emit(ev Event) {
	ev.TS = time.Now().UTC()
	if e.err == nil {
		e.err = e.enc.Encode(ev)
	}
}

// RunStarts writes run_start.
func (e *Events) RunStarts(id string, run *result.Run) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emit(Event{Type: EventRunStart, RunID: id, Run: run})
}

// PointStarts writes point_start.
func (e *Events) PointStarts(design string, n, trial int) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.design, e.clients, e.trial, e.started, e.lastProg = design, n, trial, time.Now(), time.Now()
	e.emit(Event{Type: EventPointStart, Design: design, Clients: n, Trial: trial})
}

// Progress writes progress at most once per ProgressEvery.
func (e *Events) Progress(done, ok int, failed map[string]int) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if time.Since(e.lastProg) < ProgressEvery {
		return
	}
	e.lastProg = time.Now()
	e.emit(Event{Type: EventProgress, Design: e.design, Clients: e.clients, Trial: e.trial, Done: done, Connected: ok, Failed: failed,
		Elapsed: time.Since(e.started).Seconds()})
}

// PointEnds writes point_end.
func (e *Events) PointEnds(pt result.Point) {
	if e == nil {
		return
	}
	pt.Records, pt.Samples = nil, nil
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emit(Event{Type: EventPointEnd, Design: pt.Design, Clients: pt.Clients, Trial: pt.Trial, Point: &pt})
}

// Decision writes decision.
func (e *Events) Decision(n int, why string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emit(Event{Type: EventDecision, Clients: n, Reason: why})
}

// Note writes note.
func (e *Events) Note(note string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emit(Event{Type: EventNote, Note: note})
}

// RunEnds writes run_end from the run as last saved (nil when the run
// could not start) and the error that ended it.
func (e *Events) RunEnds(run *result.Run, path string, err error) {
	if e == nil {
		return
	}
	ev := Event{Type: EventRunEnd, Path: path}
	if run != nil {
		ev.Search, ev.Verdict, ev.Complete, ev.Error = run.Search, run.Verdict, run.Complete, run.Error
		if run.Interrupted != nil {
			p := *run.Interrupted
			p.Records, p.Samples = nil, nil
			ev.Interrupted = &p
		}
	}
	if err != nil && ev.Error == "" {
		ev.Error = err.Error()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emit(ev)
}
