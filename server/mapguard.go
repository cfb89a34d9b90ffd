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
// mappings of vm.max_map_count. /proc/self/maps is counted every 32nd
// client while more than 512 mappings from the limit (at most 4 mappings
// a client, so 128 between counts) and at every client nearer. Clients
// that passed the guard but are still creating their resources are not
// in the count yet: each is reserved mapsInFlight mappings until it is
// done (their 4 rings, and a thread with its stack and guard page that
// the runtime may start for a blocking cgo call).
type mapGuard struct {
	limit   int // 0: unknown, no guard
	mu      sync.Mutex
	n       int
	last    int
	pending int
}

const mapsInFlight = 6

func newMapGuard() *mapGuard {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return &mapGuard{}
	}
	limit, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return &mapGuard{limit: limit}
}

// check admits one client or refuses it; an admitted client calls done
// once its resources exist (or failed).
func (g *mapGuard) check() (done func(), err error) {
	if g.limit <= 0 {
		return func() {}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	reserved := g.pending * mapsInFlight
	if g.last+reserved < g.limit-512 && g.n%32 != 1 {
		return g.admitLocked(), nil
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return g.admitLocked(), nil
	}
	g.last = bytes.Count(b, []byte{'\n'})
	if room := mapHeadroom(g.limit); g.last+reserved+mapsInFlight > g.limit-room {
		return nil, &fabric.VerbError{Verb: "ibv_create_qp", Errno: syscall.ENOMEM,
			Detail: fmt.Sprintf("not attempted: the server holds %d of vm.max_map_count %d mappings, %d more are being created, and it leaves the last %d to the Go runtime", g.last, g.limit, reserved, room)}
	}
	return g.admitLocked(), nil
}

func (g *mapGuard) admitLocked() func() {
	g.pending++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.pending--
			g.mu.Unlock()
		})
	}
}
