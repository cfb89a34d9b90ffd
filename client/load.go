package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Load is what one load-generator process runs.
type Load struct {
	N      int     // clients in this process
	IDBase int     // first client ID (IDs are unique across processes)
	Proc   int     // this process's index
	Rate   float64 // launches per second; 0 = all at once
	// InFlight bounds the connection attempts in progress at once (0 =
	// unbounded). Connected clients do not count: they all stay open, so
	// the server still holds N at once; the window only keeps N handshakes
	// from fighting for the CPU and the listen queue until all time out.
	InFlight int
	// Lead connects the first client alone, before the others start, so
	// that with session resumption (a ClientSessionCache in the TLS
	// configuration) every other client finds its ticket and resumes:
	// launched together, the first InFlight clients would all do full
	// handshakes. The lead is one of the N and its connect is timed like
	// the others.
	Lead bool
	// Ended, if set, is told each client's record as its attempt ends
	// (before progress), from the client's goroutine.
	Ended func(rec *result.ClientRecord)
	// WallStop, if not 0, stops launching once the point has failed at a
	// wall: more than FailAllowance of these clients failed, and the
	// last WallStop attempts to end were all turned away by a resource
	// (result.WallRefusal). Past a wall every further client is turned
	// away too, one handshake each: 54,000 of them took 15 minutes at
	// one 70,000-client point in the TCG guest, and told nothing the
	// first thousand had not.
	WallStop int
	// FailAllowance is how many failed clients the point may have and
	// still pass its threshold.
	FailAllowance int
}

// wallStop is Load.WallStop's account of the attempts that ended.
type wallStop struct {
	limit, allowance int
	mu               sync.Mutex
	failed, inRow    int
	stop             bool
}

func (w *wallStop) ended(rec *result.ClientRecord) {
	if w.limit <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case rec.Outcome == result.OutcomeOK:
		w.inRow = 0
		return
	case result.WallRefusal(rec.Outcome, rec.Errno):
		w.inRow++
	default:
		w.inRow = 0
	}
	w.failed++
	if w.failed > w.allowance && w.inRow >= w.limit {
		w.stop = true
	}
}

func (w *wallStop) stopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stop
}

// Run launches l.N clients concurrently, paced by l.Rate, and waits until
// every one has connected or failed. The connected ones stay open (the
// caller closes them) so the server holds them all at once. progress, if
// set, is called after each attempt with the totals so far. unlaunched
// counts the clients l.WallStop kept from launching.
//
// Cancelling ctx cuts the load short: no client is launched after it,
// and a client whose attempt fails once ctx is cancelled was stopped by
// it, not by the server, so it has no outcome. The records returned are
// those of the clients that had an outcome, in launch order: fewer than
// l.N when the load was cut short.
func Run(ctx context.Context, d *Dialer, l Load, progress func(done, ok int)) (recs []result.ClientRecord, conns []*Conn, unlaunched int) {
	recs = make([]result.ClientRecord, l.N)
	conns = make([]*Conn, l.N)
	cut := make([]bool, l.N) // each index written by its client's goroutine, or before it starts
	var done, ok atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	wall := &wallStop{limit: l.WallStop, allowance: l.FailAllowance}
	var window chan struct{}
	if l.InFlight > 0 {
		window = make(chan struct{}, l.InFlight)
	}
	launch := func(i int) {
		c, rec := d.Connect(ctx, l.IDBase+i, l.Proc)
		if c == nil && ctx.Err() != nil {
			cut[i] = true
			return
		}
		recs[i], conns[i] = rec, c
		wall.ended(&recs[i])
		if l.Ended != nil {
			l.Ended(&recs[i])
		}
		n := done.Add(1)
		k := ok.Load()
		if c != nil {
			k = ok.Add(1)
		}
		if progress != nil {
			progress(int(n), int(k))
		}
	}
	first := 0
	if l.Lead && l.N > 1 {
		launch(0)
		first = 1
	}
	for i := first; i < l.N; i++ {
		if ctx.Err() != nil {
			for j := i; j < l.N; j++ {
				cut[j] = true
			}
			break
		}
		Pace(ctx, start, i, l.Rate)
		if window != nil {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				for j := i; j < l.N; j++ {
					cut[j] = true
				}
				wg.Wait()
				recs, conns = finished(recs, conns, cut)
				return recs, conns, 0
			}
		}
		if wall.stopped() {
			if window != nil {
				<-window
			}
			for j := i; j < l.N; j++ {
				cut[j] = true
			}
			unlaunched = l.N - i
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() {
				if window != nil {
					<-window
				}
			}()
			launch(i)
		}(i)
	}
	wg.Wait()
	recs, conns = finished(recs, conns, cut)
	return recs, conns, unlaunched
}

// Pace waits until launch i is due on a schedule of rate launches a
// second from start (launch 0 at start; rate 0: no wait), or until ctx
// ends. It paces against the schedule, not the previous launch, so slow
// launches do not lower the rate.
func Pace(ctx context.Context, start time.Time, i int, rate float64) {
	if rate <= 0 || i <= 0 {
		return
	}
	due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
	if wait := time.Until(due); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// finished is the records of the clients that had an outcome, and the
// connections of those that connected.
func finished(recs []result.ClientRecord, conns []*Conn, cut []bool) ([]result.ClientRecord, []*Conn) {
	out := recs[:0]
	for i, r := range recs {
		if !cut[i] {
			out = append(out, r)
		}
	}
	open := conns[:0]
	for _, c := range conns {
		if c != nil {
			open = append(open, c)
		}
	}
	return out, open
}

// CloseAll closes conns concurrently.
func CloseAll(conns []*Conn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func(c *Conn) {
			defer wg.Done()
			c.Close()
		}(c)
	}
	wg.Wait()
}
