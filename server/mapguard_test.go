package server

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

func TestMapHeadroom(t *testing.T) {
	for limit, want := range map[int]int{65530: 256, 1000: 20, 100: 16, 262144: 256} {
		if got := mapHeadroom(limit); got != want {
			t.Errorf("mapHeadroom(%d) = %d, want %d", limit, got, want)
		}
	}
}

// The guard refuses with ENOMEM from ibv_create_qp once this process is
// within the headroom of the limit, and lets clients through far from it.
func TestMapGuard(t *testing.T) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	now := bytes.Count(b, []byte{'\n'})
	if _, err := (&mapGuard{}).check(); err != nil {
		t.Errorf("no limit known: %v", err)
	}
	far := &mapGuard{limit: now + 10000}
	for i := 0; i < 100; i++ {
		done, err := far.check()
		if err != nil {
			t.Fatalf("client %d refused %d mappings from the limit: %v", i, 10000, err)
		}
		done()
	}
	if far.pending != 0 {
		t.Errorf("%d clients still reserved after done", far.pending)
	}
	// Within 512 of the limit it counts at once; 10 mappings left is
	// inside the headroom (16).
	near := &mapGuard{limit: now + 10}
	_, err = near.check()
	var ve *fabric.VerbError
	if !errors.As(err, &ve) || ve.Verb != "ibv_create_qp" || ve.Errno != syscall.ENOMEM {
		t.Fatalf("near the limit: %v, want ibv_create_qp ENOMEM", err)
	}
	tight := &mapGuard{limit: now}
	if _, err := tight.check(); err == nil {
		t.Error("at the limit: admitted")
	}
}

// Clients still creating their resources count against the limit before
// /proc/self/maps shows them: with room for 10 in-flight clients beyond
// the headroom, the 11th is refused until one is done.
func TestMapGuardReservesInFlight(t *testing.T) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	now := bytes.Count(b, []byte{'\n'})
	// Slack for mappings this test process may add meanwhile.
	const slack = 4
	g := &mapGuard{limit: now + mapHeadroom(now+100) + 10*mapsInFlight + slack}
	var dones []func()
	for i := 0; i < 10; i++ {
		done, err := g.check()
		if err != nil {
			t.Fatalf("in-flight client %d refused: %v", i, err)
		}
		dones = append(dones, done)
	}
	if _, err := g.check(); err == nil {
		t.Fatal("11th in-flight client admitted: the 10 being created were not reserved")
	}
	dones[0]()
	dones[0]() // idempotent
	if g.pending != 9 {
		t.Fatalf("pending %d after one done, want 9", g.pending)
	}
	if _, err := g.check(); err != nil {
		t.Errorf("refused after one in-flight client finished: %v", err)
	}
}

// Far from the limit the guard counts /proc/self/maps rarely (its cost
// grows with the mappings), near it at every client.
func TestMapGuardCountsRarelyWhenFar(t *testing.T) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	now := bytes.Count(b, []byte{'\n'})
	far := &mapGuard{limit: now + 1_000_000}
	for i := 0; i < 10_000; i++ {
		done, err := far.check()
		if err != nil {
			t.Fatalf("client %d refused far from the limit: %v", i, err)
		}
		done()
	}
	if far.reads > 2 {
		t.Errorf("%d counts for 10,000 clients with room for 1,000,000 mappings, want at most 2", far.reads)
	}
	// Room for 10 clients beyond the headroom: a count at least every
	// 5th client (half the room), and this process adds few mappings.
	near := &mapGuard{limit: now + mapHeadroom(now+100) + 10*mapsInFlight}
	for i := 0; i < 20; i++ {
		done, err := near.check()
		if err != nil {
			t.Fatalf("client %d refused with room for 10: %v", i, err)
		}
		done()
	}
	if near.reads < 4 {
		t.Errorf("%d counts for 20 clients near the limit, want one at least every 5th", near.reads)
	}
}

// At the wall a refusal stands on its count until something could have
// made room: the clients after it are refused without reading
// /proc/self/maps again, and a client done creating its resources or
// freeing them makes the next one counted.
func TestMapGuardRefusesFastAtTheWall(t *testing.T) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	now := bytes.Count(b, []byte{'\n'})
	// Room for one in-flight client beyond the headroom, with slack for
	// mappings this test process may add meanwhile.
	const slack = 4
	g := &mapGuard{limit: now + mapHeadroom(now+100) + mapsInFlight + slack}
	done, err := g.check()
	if err != nil {
		t.Fatalf("first client refused: %v", err)
	}
	_, first := g.check()
	if first == nil {
		t.Fatal("second client admitted while the first, reserved, fills the room")
	}
	reads := g.reads
	for i := 0; i < 1000; i++ {
		_, err := g.check()
		if err == nil {
			t.Fatalf("client %d admitted at the wall", i)
		}
		if err != first {
			t.Fatalf("client %d: %v, want the standing refusal %v", i, err, first)
		}
	}
	if g.reads != reads {
		t.Errorf("%d counts for 1,000 refusals at the wall, want none", g.reads-reads)
	}
	var ve *fabric.VerbError
	if !errors.As(first, &ve) || ve.Errno != syscall.ENOMEM || !bytes.Contains([]byte(ve.Detail), []byte("of vm.max_map_count")) {
		t.Errorf("refusal %v: want ibv_create_qp ENOMEM naming the count (collectors read it)", first)
	}
	// The first client is done: its reservation is free again. While
	// another client's count is under way the refusal still stands, at
	// once, without a count of its own.
	done()
	g.reading = true
	if _, err := g.check(); err != first || g.reads != reads {
		t.Errorf("during a count: %v after %d counts, want the standing refusal and none", err, g.reads-reads)
	}
	g.reading = false
	next, err := g.check()
	if err != nil {
		t.Errorf("refused after the in-flight client finished: %v", err)
	}
	if g.reads != reads+1 {
		t.Errorf("%d counts after a client finished, want 1", g.reads-reads)
	}
	next()
	// Fill the guard again, then free a client: counted again.
	g.limit = now
	if _, err := g.check(); err == nil {
		t.Fatal("admitted at the limit")
	}
	reads = g.reads
	g.check()
	if g.reads != reads {
		t.Fatal("counted again without a change")
	}
	g.freed()
	g.check()
	if g.reads != reads+1 {
		t.Errorf("%d counts after a client was freed, want 1", g.reads-reads)
	}
}

// held drives g as a server does: clients admitted up to inflight at a
// time, each adding per mappings to a process that starts with base,
// the oldest done first, until a refusal with none in flight. It
// returns the clients held and the most mappings the process had.
func held(g *mapGuard, base, per, inflight int) (n, most int) {
	maps := base
	g.count = func() (int, error) { return maps, nil }
	var queue []func()
	finish := func() {
		maps += per
		most = max(most, maps)
		queue[0]()
		queue = queue[1:]
		n++
	}
	for {
		done, err := g.check()
		if err != nil {
			if len(queue) == 0 {
				return n, most
			}
			finish()
			continue
		}
		queue = append(queue, done)
		if len(queue) > inflight {
			finish()
		}
	}
}

// Once the guard has measured what a client maps, it reserves that, not
// the worst case, for the clients it has not counted yet: it reads the
// file a fraction of the times on the way to the wall, and still stops
// exactly where the headroom begins, never inside it.
func TestMapGuardLearnsClientCost(t *testing.T) {
	const base, limit, inflight = 1000, 65530, 32
	room := mapHeadroom(limit)
	for _, per := range []int{1, 4} {
		g := &mapGuard{limit: limit}
		n, most := held(g, base, per, inflight)
		if want := (limit - room - base) / per; n != want {
			t.Errorf("%d mappings a client: held %d, want %d (the room up to the headroom)", per, n, want)
		}
		if most > limit-room {
			t.Errorf("%d mappings a client: the process reached %d mappings, inside the headroom (%d of %d)", per, most, room, limit)
		}
		if g.cost != per {
			t.Errorf("%d mappings a client: measured %d", per, g.cost)
		}
		// Reserving the worst case, the guard read the file several
		// times more (results/README.md has the figures).
		if bound := 100; g.reads > bound {
			t.Errorf("%d mappings a client: %d counts to reach the wall, want at most %d", per, g.reads, bound)
		}
		t.Logf("%d mappings a client: held %d, %d counts", per, n, g.reads)
	}
}
