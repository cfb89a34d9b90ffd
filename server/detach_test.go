package server_test

import (
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// openFiles counts this process's file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(ents)
}

// With Detach the server closes each client's control connection once it
// is accepted, and the client closes its end: n connected clients hold no
// socket on either side (without it they hold two per client, both ends
// being in this process). Each client still completes its verified round
// trips over the QP, and leaves with a goodbye the server releases it on,
// in every mode, without counting a failure.
func TestDetach(t *testing.T) {
	const n = 40
	for _, mode := range server.Modes {
		if mode == server.ModeMux {
			continue // its logical clients keep their connections (TestMuxRefusesDetach)
		}
		t.Run(mode, func(t *testing.T) {
			h := newHarnessOpts(t, n, harnessOpts{mode: mode, detach: true})
			before := openFiles(t)
			recs, conns, _ := client.Run(context.Background(), h.dialer, client.Load{N: n}, nil)
			for _, r := range recs {
				if r.Outcome != "ok" {
					t.Fatalf("client %d: %s: %s", r.ID, r.Outcome, r.Error)
				}
			}
			// Sockets close asynchronously at most by a few (the last
			// clients' ends may still be closing).
			if grew := openFiles(t) - before; grew >= n/4 {
				t.Errorf("%d detached clients connected: %d more open files (want none per client)", n, grew)
			}
			// The server counts a detached client after writing it
			// Detached, and in the pool and srq modes the routers echo as
			// soon as its QP is bound: the client may finish its round
			// trips before its handler has counted it. Wait for the count.
			eventually.Within(guard, func() bool { return h.srv.Stats().Connected == n })
			st := h.srv.Stats()
			if st.Connected != n || st.PeakActive != n || st.Released != 0 {
				t.Errorf("connected: stats connected %d, peak %d, released %d; want %d, %d, 0", st.Connected, st.PeakActive, st.Released, n, n)
			}
			client.CloseAll(conns)
			if !eventually.Within(guard, func() bool { return h.srv.Stats().Released == n }) {
				t.Fatalf("after %d goodbyes the server released %d clients", n, h.srv.Stats().Released)
			}
			if st := h.srv.Stats(); len(st.Failures) != 0 || st.Goodbyes != n || !st.Detached {
				t.Errorf("stats: failures %v (errors %v), %d goodbyes, detached %v; want none, %d, true",
					st.Failures, st.Errors, st.Goodbyes, st.Detached, n)
			}
			h.stop()
			if !eventually.Within(guard, func() bool { return reflect.DeepEqual(h.inUse(), h.idle) }) {
				t.Errorf("after the server stopped the fabric holds %v, want %v", h.inUse(), h.idle)
			}
		})
	}
}

// A goodbye the server's device has acknowledged is the server's: when
// the server stops right after its clients left, as a run stops it once
// the load generators exit, every goodbye already received is counted as
// one, not as a client released by the stop.
func TestDetachGoodbyesBeforeStop(t *testing.T) {
	const n = 40
	for _, mode := range server.Modes {
		if mode == server.ModeMux {
			continue // its logical clients keep their connections (TestMuxRefusesDetach)
		}
		t.Run(mode, func(t *testing.T) {
			h := newHarnessOpts(t, n, harnessOpts{mode: mode, detach: true})
			recs, conns, _ := client.Run(context.Background(), h.dialer, client.Load{N: n}, nil)
			for _, r := range recs {
				if r.Outcome != "ok" {
					t.Fatalf("client %d: %s: %s", r.ID, r.Outcome, r.Error)
				}
			}
			client.CloseAll(conns) // each returns once its goodbye was acknowledged
			h.stop()
			if st := h.srv.Stats(); st.Goodbyes != n || st.Released != n || len(st.Failures) != 0 {
				t.Errorf("server stopped right after %d goodbyes: stats %d goodbyes, %d released, failures %v; want %d, %d, none",
					n, st.Goodbyes, st.Released, st.Failures, n, n)
			}
		})
	}
}
