package server

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// mapHeadroom is how many of vm.max_map_count's mappings the server leaves
// to the Go runtime. On rxe every CQ ring and QP ring is a mapping of the
// server process; a verb that meets the limit fails with ENOMEM, but the
// runtime, which needs mappings for thread stacks and heap growth, dies
// on the same limit ("fatal error: ...") and takes every client with it.
// 2% of the limit, at most 256 (1,310 of the default 65,530 would refuse
// clients the device could still take).
func mapHeadroom(limit int) int { return max(16, min(256, limit/50)) }

// mapGuard refuses new clients once the process is within mapHeadroom
// mappings of vm.max_map_count. Clients that passed the guard but are
// still creating their resources are not in a count yet: each is
// reserved what a client costs until it is done (see perClient).
//
// /proc/self/maps is counted again once the clients admitted since the
// last count could, at that cost each, have used half of the room that
// count left: rarely far from the limit, at every client near it. Reading
// the file costs the kernel time in proportion to the mappings, so the
// earlier rule of a count every 32nd client made the guard cost grow with
// the clients held: 3.3% of the server's CPU at 3,000 clients in srq mode
// under TCG, and more at 10,000 (1 mapping per client; 4 in per-client
// mode). The half left unused is the slack for mappings others add
// meanwhile (heap arenas, thread stacks).
//
// Each count also measures what a client costs (learnLocked), because
// a fixed worst case (mapsInFlight) made the guard count several times
// too often in the modes that map fewer, most often near the wall, where
// a count reads the most lines.
//
// A count that refused stands until something could have made room: an
// admitted client finished creating its resources (its reservation is
// more than it maps) or a client's resources were freed. Until then the
// next clients are refused on that count without reading the file again:
// at the wall every client was a count of ~65,000 lines under the lock,
// about a second each under TCG, and the remaining clients of a point
// were refused at that pace instead of at the handshake rate.
//
// A count is read outside the lock, and while one is under way the
// refusal before it stands for the clients that come meanwhile: at the
// wall each admitted client's completion makes the next client counted
// again (a second of reading under TCG), and with the read under the
// lock every refusal waited for it: 3-6 outcomes a second at 16,000
// clients in per-client mode (search --backend vm --lo 1000, 32,000
// clients against a wall near 16,230), where the handshakes gave 150.
type mapGuard struct {
	limit int // 0: unknown, no guard
	// read serialises the counts; mu guards the rest and is never held
	// while reading.
	read    sync.Mutex
	reading bool
	mu      sync.Mutex
	counted bool // last holds a count
	last    int  // mappings at the last count
	since   int  // clients admitted since then
	pending int  // admitted clients still creating resources
	// full holds the refusal of the last count while changes still
	// equals the changes it was taken at.
	full    error
	fullAt  int
	changes int // clients done or freed, ever
	reads   int // counts taken (ServerStats.MapCounts)
	// cost is the mappings reserved per client not yet in a count: 0
	// until measured (mapsInFlight then). done and freed count clients
	// done and freed ever; doneAt and freedAt are their values at the
	// last count.
	cost            int
	done, freedN    int
	doneAt, freedAt int
	// count reads the process's mappings (countMaps; tests plant their
	// own).
	count func() (int, error)
}

const (
	mapsInFlight = 6
	// learnAfter is the fewest clients done between two counts whose
	// mappings measure a client's cost: fewer are mostly the clients
	// caught half-created by the first count.
	learnAfter = 64
)

func newMapGuard() *mapGuard {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return &mapGuard{}
	}
	limit, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return &mapGuard{limit: limit}
}

// countMaps counts the lines of /proc/self/maps, one per mapping.
func countMaps() (int, error) {
	b, err := os.ReadFile("/proc/self/maps")
	return bytes.Count(b, []byte{'\n'}), err
}

// perClient is the mappings reserved for each client not yet counted:
// mapsInFlight until a client's cost is measured (its rings, and a thread
// with its stack and guard page that the runtime may start for a
// blocking cgo call), then the cost measured. Threads the runtime starts
// show in the counts, and so in the cost.
func (g *mapGuard) perClient() int {
	if g.cost == 0 {
		return mapsInFlight
	}
	return g.cost
}

// learnLocked measures a client's cost from the count n just taken: the
// mappings added since the previous count over the clients done since,
// rounded, 1 to mapsInFlight, when at least learnAfter were done and
// none was freed meanwhile (a free takes mappings away and would make
// clients look cheaper than they are). The cost kept is the most any
// such stretch showed.
func (g *mapGuard) learnLocked(n int) {
	done := g.done - g.doneAt
	if g.counted && done >= learnAfter && g.freedN == g.freedAt {
		c := min(mapsInFlight, max(1, (n-g.last+done/2)/done))
		g.cost = max(g.cost, c)
	}
	g.doneAt, g.freedAt = g.done, g.freedN
}

// check admits one client or refuses it; an admitted client calls done
// once its resources exist (or failed). A refusal always rests on a
// count taken since the last change that could have made room.
func (g *mapGuard) check() (done func(), err error) {
	if g.limit <= 0 {
		return func() {}, nil
	}
	g.mu.Lock()
	if done, err, ok := g.decideLocked(); ok {
		g.mu.Unlock()
		return done, err
	}
	if g.reading && g.full != nil {
		// A count is under way: until it says otherwise, the last
		// refusal stands.
		err := g.full
		g.mu.Unlock()
		return nil, err
	}
	g.mu.Unlock()

	g.read.Lock()
	defer g.read.Unlock()
	g.mu.Lock()
	// The count just before may have answered for this client too.
	if done, err, ok := g.decideLocked(); ok {
		g.mu.Unlock()
		return done, err
	}
	g.reading = true
	changes := g.changes
	g.mu.Unlock()
	count := g.count
	if count == nil {
		count = countMaps
	}
	n, rerr := count()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reading = false
	if rerr != nil {
		return g.admitLocked(), nil
	}
	g.reads++
	g.learnLocked(n)
	g.counted, g.since, g.last = true, 0, n
	room := mapHeadroom(g.limit)
	reserved := g.pending * g.perClient()
	if g.last+reserved+g.perClient() > g.limit-room {
		g.full = &fabric.VerbError{Verb: "ibv_create_qp", Errno: syscall.ENOMEM,
			Detail: fmt.Sprintf("not attempted: the server holds %d of vm.max_map_count %d mappings, %d more are being created, and it leaves the last %d to the Go runtime", g.last, g.limit, reserved, room)}
		g.fullAt = changes // a change during the read makes the next client count again
		return nil, g.full
	}
	g.full = nil
	return g.admitLocked(), nil
}

// decideLocked admits or refuses without a count when the last one
// answers (ok); otherwise the caller counts.
func (g *mapGuard) decideLocked() (done func(), err error, ok bool) {
	if g.full != nil && g.fullAt == g.changes {
		return nil, g.full, true
	}
	room := mapHeadroom(g.limit)
	if g.counted && g.full == nil && (g.since+g.pending+1)*g.perClient() <= (g.limit-room-g.last)/2 {
		return g.admitLocked(), nil, true
	}
	return nil, nil, false
}

// counts is how many times the guard read /proc/self/maps.
func (g *mapGuard) counts() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reads
}

// freed says a client's resources were released: the next client is
// counted again.
func (g *mapGuard) freed() {
	g.mu.Lock()
	g.changes++
	g.freedN++
	g.mu.Unlock()
}

func (g *mapGuard) admitLocked() func() {
	g.pending++
	g.since++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.pending--
			g.changes++
			g.done++
			g.mu.Unlock()
		})
	}
}
